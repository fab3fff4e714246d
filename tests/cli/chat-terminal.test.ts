/**
 * `palaver chat` on a real terminal (a pseudo-terminal from util-linux `script`): a background log
 * line must not be drawn over the prompt and what the user has typed so far.
 */
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { FakeOpenAI, lastUserText } from "../fakes/openai-server.js";
import { CHILD_TIMEOUT_MS, MAIN } from "../helpers/cli.js";
import { onTerminal } from "../helpers/terminal.js";
import { waitFor } from "../helpers/wait.js";
import { haveCommand, requireOrSkip } from "../helpers/requires.js";

const NO_SCRIPT = requireOrSkip(
  haveCommand("script")
    ? ""
    : "the pseudo-terminal chat test needs util-linux `script` (apt-get install bsdutils)",
);

const CLEAR_LINE = "\u001b[2K";

describe.skipIf(NO_SCRIPT)("palaver chat on a terminal", () => {
  let dir: string;
  let fake: FakeOpenAI;
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), "palaver-chat-tty-"));
    fake = await FakeOpenAI.start();
  });
  afterEach(async () => {
    await fake.close();
    await rm(dir, { recursive: true, force: true });
  });

  it("draws a background log line beside the prompt, keeping what the user was typing", async () => {
    const go = join(dir, "go");
    const configPath = join(dir, "config.json");
    await writeFile(
      configPath,
      JSON.stringify({
        agents: { defaults: { workspace: join(dir, "ws"), model: "fake-model", provider: "custom" } },
        providers: { custom: { apiKey: "k", apiBase: fake.baseURL } },
        // An MCP server that fails once the test says so: its warning arrives while the prompt waits.
        tools: {
          mcpServers: {
            late: {
              command: process.execPath,
              args: [
                "-e",
                `setInterval(() => require("fs").existsSync(${JSON.stringify(go)}) && process.exit(3), 50)`,
              ],
            },
          },
        },
      }),
    );
    const term = onTerminal([MAIN, "chat", "--config", configPath], { cwd: dir, home: dir });
    const { child, exited } = term;
    try {
      await waitFor(() => term.screen.includes("you › "), CHILD_TIMEOUT_MS, "the prompt");
      const promptAt = term.screen.indexOf("you › ");
      child.stdin.write("hel");
      // readline echoes after a cursor move: "you › \e[7Ghel".
      await waitFor(() => term.screen.includes("hel", promptAt), CHILD_TIMEOUT_MS, "the typed text echoed");
      const beforeLog = term.screen.length;

      await writeFile(go, "");
      await waitFor(
        () => term.screen.includes('MCP server "late"', beforeLog),
        CHILD_TIMEOUT_MS,
        "the log line",
      );
      const logAt = term.screen.indexOf('MCP server "late"', beforeLog);
      await waitFor(
        () => term.screen.includes("you › hel", logAt),
        CHILD_TIMEOUT_MS,
        "the prompt drawn again",
      );

      // The prompt line was cleared before the log line was written, then drawn again after it.
      expect(term.screen.slice(beforeLog, logAt)).toContain(CLEAR_LINE);
      expect(term.screen.slice(logAt)).toContain("you › hel");

      // What the user typed is intact: finishing the line sends "hello".
      fake.enqueue({ content: "hi there" });
      child.stdin.write("lo\r");
      await waitFor(() => term.screen.includes("hi there"), CHILD_TIMEOUT_MS, "the answer");
      expect(lastUserText(fake.requests[0]!)).toBe("hello");

      child.stdin.write("exit\r");
      expect(await exited).toBe(0);
    } finally {
      child.kill("SIGKILL");
    }
  });
});
