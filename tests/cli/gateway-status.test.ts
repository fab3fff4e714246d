/**
 * A start that prints what a person needs, and a way back to the link (issue 35): the built
 * `palaver gateway` on a pseudo-terminal (util-linux `script`) prints a short summary with the web
 * chat link on a line of its own and no structured log; `palaver status` then names the running
 * gateway (pid, address, since) and the same link; `palaver web` prints it again; once the gateway
 * stops, status says it is not running.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { FakeOpenAI } from "../fakes/openai-server.js";
import { CHILD_TIMEOUT_MS, runCli } from "../helpers/cli.js";
import { DIST_MAIN } from "../helpers/dist.js";
import { writeGatewayConfig } from "../helpers/gateway-process.js";
import { onTerminal } from "../helpers/terminal.js";
import { waitFor } from "../helpers/wait.js";
import { haveCommand, requireOrSkip } from "../helpers/requires.js";

const NO_SCRIPT = requireOrSkip(
  haveCommand("script")
    ? ""
    : "the pseudo-terminal gateway test needs util-linux `script` (apt-get install bsdutils)",
);

const LINK = /^http:\/\/127\.0\.0\.1:\d+\/#token=[\w-]+$/m;

describe.skipIf(NO_SCRIPT)("palaver gateway on a terminal, palaver status and palaver web", () => {
  let dir: string;
  let fake: FakeOpenAI;
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), "palaver-gw-status-"));
    fake = await FakeOpenAI.start();
  });
  afterEach(async () => {
    await fake.close();
    await rm(dir, { recursive: true, force: true });
  });

  it(
    "prints a summary with the link, and status/web find the running gateway",
    { timeout: 120_000 },
    async () => {
      // No platform enabled: the web chat runs by default.
      const configPath = await writeGatewayConfig(dir, { llmBaseURL: fake.baseURL });
      const env = { HOME: dir };
      const before = await runCli(["status", "--config", configPath], { cwd: dir, env, entry: DIST_MAIN });
      expect(before.stdout).toMatch(/gateway\s+not running/);

      const term = onTerminal([DIST_MAIN, "gateway", "--config", configPath], { cwd: dir, home: dir });
      const { child, exited } = term;
      try {
        await waitFor(
          () => LINK.test(term.screen.replaceAll("\r", "")),
          CHILD_TIMEOUT_MS,
          "the web chat link",
        );
        const text = term.screen.replaceAll("\r", "");
        const link = LINK.exec(text)![0];
        expect(text).toMatch(/palaver is running \(pid \d+\)/);
        expect(text).toMatch(/channels\s+web/);
        expect(text).toContain(`model     custom at ${fake.baseURL}`);
        // The structured log is for --verbose or a service: none of its records on the terminal.
        expect(text).not.toContain('"level"');
        expect(text).not.toContain("health endpoint listening");

        const status = await runCli(["status", "--config", configPath], { cwd: dir, env, entry: DIST_MAIN });
        expect(status.code).toBe(0);
        const running = /gateway\s+running \(pid (\d+), since (\S+)\) at (http:\/\/127\.0\.0\.1:\d+)/.exec(
          status.stdout,
        );
        expect(running, status.stdout).not.toBeNull();
        expect(Number.isNaN(Date.parse(running![2]!))).toBe(false);
        expect(link.startsWith(`${running![3]!}/`)).toBe(true);
        expect(status.stdout).toMatch(new RegExp(`web chat\\s+${link.replace(/[.?*+^$()[\]\\/]/g, "\\$&")}`));

        // Piped: the link alone, nothing to scan.
        const web = await runCli(["web", "--config", configPath], { cwd: dir, env, entry: DIST_MAIN });
        expect(web).toMatchObject({ code: 0, stdout: `${link}\n` });

        process.kill(Number(running![1]), "SIGTERM");
        expect(await exited).toBe(0);
        const after = await runCli(["status", "--config", configPath], { cwd: dir, env, entry: DIST_MAIN });
        expect(after.stdout).toMatch(/gateway\s+not running/);
        const noWeb = await runCli(["web", "--config", configPath], { cwd: dir, env, entry: DIST_MAIN });
        expect(noWeb.code).toBe(1);
        expect(noWeb.stderr).toContain("no gateway is running");
      } finally {
        child.kill("SIGKILL");
      }
    },
  );
});
