/**
 * Streamed replies in `palaver chat` (channels.streaming, on by default), against the SSE fake LLM:
 * on a real terminal (a pseudo-terminal from util-linux `script`, 40 columns) the reply is printed
 * as it arrives, each line redrawn rendered in its place once complete, and the prompt comes back
 * below it; a reply taller than the screen is printed once, never raw and then again rendered;
 * `chat -m` prints the final alone, nothing of the stream.
 */
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { eraseRows, rowsOf } from "../../src/channels/terminal/stream.js";
import { FakeOpenAI } from "../fakes/openai-server.js";
import { CHILD_TIMEOUT_MS, MAIN, runCli } from "../helpers/cli.js";
import { onTerminal } from "../helpers/terminal.js";
import { waitFor } from "../helpers/wait.js";
import { haveCommand, requireOrSkip } from "../helpers/requires.js";

const NO_SCRIPT = requireOrSkip(
  haveCommand("script")
    ? ""
    : "the pseudo-terminal streaming test needs util-linux `script` (apt-get install bsdutils)",
);

// Two rows on a 40-column terminal, or three.
const ANSWER = "Hello **there**, this is a streamed answer that wraps twice on a narrow terminal.";
const RENDERED = "Hello there, this is a streamed answer that wraps twice on a narrow terminal."; // NO_COLOR
const ESC = "\u001b[";
const escape = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");

let dir: string;
let fake: FakeOpenAI;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), "palaver-chat-stream-"));
  fake = await FakeOpenAI.start();
});
afterEach(async () => {
  await fake.close();
  await rm(dir, { recursive: true, force: true });
});

async function writeConfig(): Promise<string> {
  const configPath = join(dir, "config.json");
  await writeFile(
    configPath,
    JSON.stringify({
      agents: { defaults: { workspace: join(dir, "ws"), model: "fake-model", provider: "custom" } },
      providers: { custom: { apiKey: "k", apiBase: fake.baseURL } },
    }),
  );
  return configPath;
}

describe.skipIf(NO_SCRIPT)("palaver chat streaming on a terminal", () => {
  it("prints the reply as it arrives, then erases its raw rows and draws it rendered", async () => {
    const configPath = await writeConfig();
    const term = onTerminal([MAIN, "chat", "--config", configPath], {
      cwd: dir,
      home: dir,
      size: { cols: 40, rows: 24 },
    });
    const { child, exited } = term;
    try {
      await waitFor(() => term.screen.includes("you › "), CHILD_TIMEOUT_MS, "the prompt");
      fake.enqueue({ content: ANSWER, pieceChars: 4, pieceDelayMs: 30 });
      const asked = term.screen.length;
      child.stdin.write("hi\r");
      await waitFor(() => term.screen.includes(RENDERED, asked), CHILD_TIMEOUT_MS, "the rendered final");
      await waitFor(
        () => term.screen.includes("you › ", term.screen.indexOf(RENDERED, asked)),
        CHILD_TIMEOUT_MS,
        "the prompt again",
      );
      const reply = term.screen.slice(asked);
      // The raw text was on screen first, as far as it had come (the last pieces may have been
      // coalesced into the final): nothing but the text between its start and the erase.
      const raw = reply.indexOf("Hello **th");
      const erase = reply.indexOf(`\r${ESC}`, raw);
      expect(raw).toBeGreaterThanOrEqual(0);
      const streamed = reply.slice(raw, erase);
      expect(ANSWER.startsWith(streamed)).toBe(true);
      expect(rowsOf(streamed, 40)).toBeGreaterThan(1);
      // Then all of its rows were erased and the rendered final drawn from the first one.
      expect(reply.slice(erase)).toMatch(
        new RegExp(`^${escape(eraseRows(rowsOf(streamed, 40)))}${escape(RENDERED)}\r\n\r\n`),
      );

      child.stdin.write("exit\r");
      expect(await exited).toBe(0);
    } finally {
      child.kill("SIGKILL");
    }
  });

  it("Ctrl+C during a reply prints one notice that it stopped", async () => {
    // Issue 35: "(stopping…)", the /stop answer and the preview's own mark made three.
    const configPath = await writeConfig();
    const term = onTerminal([MAIN, "chat", "--config", configPath], {
      cwd: dir,
      home: dir,
      size: { cols: 40, rows: 24 },
    });
    const { child, exited } = term;
    try {
      await waitFor(() => term.screen.includes("you › "), CHILD_TIMEOUT_MS, "the prompt");
      fake.enqueue({ content: "word ".repeat(400), pieceChars: 5, pieceDelayMs: 50 });
      const asked = term.screen.length;
      child.stdin.write("hi\r");
      await waitFor(() => term.screen.includes("word word", asked), CHILD_TIMEOUT_MS, "the reply streaming");
      child.stdin.write("\u0003");
      await waitFor(() => term.screen.includes("you › ", asked), CHILD_TIMEOUT_MS, "the prompt again");
      // The next exchange proves every notice about the stop had its chance to be printed.
      fake.enqueue({ content: "after" });
      const next = term.screen.length;
      child.stdin.write("again\r");
      await waitFor(() => term.screen.includes("after", next), CHILD_TIMEOUT_MS, "the next reply");
      const stopped = term.screen.slice(asked, next);
      expect(stopped.match(/stop/gi)).toHaveLength(1);
      child.stdin.write("exit\r");
      expect(await exited).toBe(0);
    } finally {
      child.kill("SIGKILL");
    }
  });

  it("a reply taller than the screen is printed once: each line rendered, no raw copy left", async () => {
    const configPath = await writeConfig();
    const term = onTerminal([MAIN, "chat", "--config", configPath], {
      cwd: dir,
      home: dir,
      size: { cols: 40, rows: 10 },
    });
    const { child, exited } = term;
    const lines = Array.from({ length: 30 }, (_, i) => `line ${i + 1} **bold**`);
    try {
      await waitFor(() => term.screen.includes("you › "), CHILD_TIMEOUT_MS, "the prompt");
      fake.enqueue({ content: lines.join("\n"), pieceChars: 7, pieceDelayMs: 5 });
      const asked = term.screen.length;
      child.stdin.write("hi\r");
      await waitFor(() => term.screen.includes("line 30 bold", asked), CHILD_TIMEOUT_MS, "the last line");
      await waitFor(
        () => term.screen.includes("you › ", term.screen.indexOf("line 30 bold", asked)),
        CHILD_TIMEOUT_MS,
        "the prompt again",
      );
      const reply = term.screen.slice(asked);
      for (let i = 1; i <= 30; i++) {
        // Rendered once; its raw text (if shown while written) erased before the line ended.
        expect(reply.split(`line ${i} bold\r\n`)).toHaveLength(2);
        expect(reply).not.toContain(`line ${i} **bold**\r\n`);
      }
      expect(reply).not.toContain("────────");

      child.stdin.write("exit\r");
      expect(await exited).toBe(0);
    } finally {
      child.kill("SIGKILL");
    }
  });
});

describe("palaver chat -m with streaming on", () => {
  it("prints the final reply alone: nothing of the stream on stdout or stderr", async () => {
    const configPath = await writeConfig();
    fake.enqueue({ content: ANSWER, pieceChars: 4, pieceDelayMs: 5 });
    const result = await runCli(["chat", "-m", "hi", "--config", configPath], {
      cwd: dir,
      env: { HOME: dir },
    });
    expect(result.code).toBe(0);
    expect(fake.requests[0]!.body.stream).toBe(true);
    expect(result.stdout).toBe(`${ANSWER}\n`);
    expect(result.stderr).not.toContain("Hello");
  });
});
