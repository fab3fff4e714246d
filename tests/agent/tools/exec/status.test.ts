/**
 * Where an operator sees whether shell commands are confined: `/status` in any
 * chat and `palaver status` (the startup log is checked in exec-gateway.test.ts).
 */
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { buildStatus, formatStatus } from "../../../../src/cli/status.js";
import { loadConfig } from "../../../../src/config/load.js";
import { startHarness, type Harness } from "../../../helpers/agent-harness.js";
import { runCli } from "../../../helpers/cli.js";
import { waitFor } from "../../../helpers/wait.js";
import { writeUnconfinedBwrap } from "../helpers.js";

const asRoot = process.getuid?.() === 0;
if (!asRoot) console.warn("palaver status with a bwrap that keeps root skipped: it needs root (as CI runs)");

let h: Harness | undefined;
let dir: string | undefined;
afterEach(async () => {
  await h?.cleanup();
  h = undefined;
  if (dir) await rm(dir, { recursive: true, force: true });
  dir = undefined;
});

describe("exec sandbox status", () => {
  it("/status says whether shell commands are sandboxed", async () => {
    h = await startHarness({ config: { tools: { exec: { sandbox: "off" } } } });
    await waitFor(() => h!.execSandbox.current !== undefined, 10_000, "the sandbox decision");
    expect((await h.ask("chat", "/status")).content).toContain(
      'Shell commands (exec): NOT sandboxed (tools.exec.sandbox is "off")',
    );
  });

  it("palaver status reports an unsandboxed exec with the reason and the install line", async () => {
    dir = await mkdtemp(join(tmpdir(), "palaver-exec-status-"));
    const configPath = join(dir, "config.json");
    await writeFile(configPath, JSON.stringify({ agents: { defaults: { workspace: join(dir, "ws") } } }));
    // No bwrap on this PATH: the status command probes exactly as the gateway would.
    const out = await runCli(["status", "--config", configPath], {
      cwd: dir,
      env: { HOME: dir, PATH: join(dir, "no-bin") },
      timeoutMs: 60_000,
    });
    expect(out.code).toBe(0);
    expect(out.stdout).toMatch(
      /exec +NOT sandboxed \(bwrap \(bubblewrap\) is not installed\).*sudo apt-get install bubblewrap/,
    );
  });

  it.skipIf(!asRoot)("palaver status says NOT sandboxed when bwrap leaves commands root", async () => {
    dir = await mkdtemp(join(tmpdir(), "palaver-exec-status-"));
    const configPath = join(dir, "config.json");
    await writeFile(configPath, JSON.stringify({ agents: { defaults: { workspace: join(dir, "ws") } } }));
    const bin = join(dir, "bin");
    await mkdir(bin);
    await writeUnconfinedBwrap(bin);
    const out = await runCli(["status", "--config", configPath], {
      cwd: dir,
      env: { HOME: dir, PATH: bin },
      timeoutMs: 60_000,
    });
    expect(out.code).toBe(0);
    expect(out.stdout).toMatch(
      /exec +NOT sandboxed \(commands in the bwrap test run still ran as root \(uid 0\)\): commands run as root/,
    );
  });

  it("formats a sandboxed exec", async () => {
    dir = await mkdtemp(join(tmpdir(), "palaver-exec-status-"));
    const loaded = loadConfig({ configPath: join(dir, "config.json"), env: {}, cwd: dir, loadDotenv: false });
    const report = buildStatus(loaded, { sandboxed: true, bwrap: "/usr/bin/bwrap", network: false });
    expect(report.exec).toEqual({ sandboxed: true, detail: "sandboxed with bubblewrap (network off)" });
    expect(formatStatus(report)).toContain("exec       sandboxed with bubblewrap (network off)");
  });
});
