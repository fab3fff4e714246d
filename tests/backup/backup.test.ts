/**
 * `palaver backup` through the real CLI (dist/main.js) against a real
 * gateway child: a backup taken while the gateway answers restores into a
 * new folder with the same sessions, memory, cron jobs and pairings, and a
 * gateway started on it carries the old conversation on.
 */
import { mkdir, readdir, readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { PairingStore, pairingPath } from "../../src/pairing/store.js";
import { lastUserText } from "../fakes/openai-server.js";
import { runCli } from "../helpers/cli.js";
import { GatewayHarness } from "../helpers/gateway-process.js";

const harness = new GatewayHarness({ prefix: "palaver-backup-" });
beforeEach(() => harness.start());
afterEach(() => harness.close());

function palaver(args: string[]) {
  return runCli(args, { cwd: harness.dir, env: { HOME: harness.dir }, timeoutMs: 60_000 });
}

/** The session files (name → text) of a workspace; the running gateway's lock beside them is not one. */
async function sessionsOf(workspace: string): Promise<Map<string, string>> {
  const dir = join(workspace, "sessions");
  const out = new Map<string, string>();
  for (const name of await readdir(dir)) {
    if (name.endsWith(".jsonl")) out.set(name, await readFile(join(dir, name), "utf8"));
  }
  return out;
}

describe("backup create / verify / restore with a running gateway", { timeout: 120_000 }, () => {
  it("restores into a new folder the same sessions, memory, cron jobs and pairings, and a gateway runs on it", async () => {
    const { dir, llm, tg, configPath } = harness;
    llm.setHandler((req) => ({ content: `echo ${lastUserText(req)}` }));
    const ws = join(dir, "ws");
    await mkdir(join(ws, "memory"), { recursive: true });
    await writeFile(join(ws, "memory", "MEMORY.md"), "# Memory\n- likes tea\n");
    expect(
      (
        await palaver([
          "cron",
          "add",
          "--config",
          configPath,
          "--message",
          "water",
          "--every",
          "3600",
          "--channel",
          "telegram",
          "--to",
          "42",
        ])
      ).code,
    ).toBe(0);
    const pairing = new PairingStore(pairingPath(dir));
    const { code } = await pairing.request("telegram", "77", "77");
    await pairing.approve(code, "test");

    const gateway = await harness.startGateway();
    tg.userMessage({ text: "first words" });
    await tg.waitForSent((m) => m.text === "echo first words", 30_000);

    // The backup is taken while the gateway answers another message.
    const out = join(dir, "b.tar.gz");
    tg.userMessage({ text: "during the backup" });
    const created = await palaver([
      "backup",
      "create",
      "--config",
      configPath,
      "--out",
      out,
      "--include-secrets",
    ]);
    expect(created.code, created.stderr).toBe(0);
    await tg.waitForSent((m) => m.text === "echo during the backup", 30_000);

    const verified = await palaver(["backup", "verify", out]);
    expect(verified.code, verified.stderr).toBe(0);

    // Over the current install: refused while its gateway runs.
    const over = await palaver(["backup", "restore", out, "--config", configPath, "--yes"]);
    expect(over.code).toBe(1);
    expect(over.stderr).toMatch(/a gateway \(pid \d+\) runs on/);

    const to = join(dir, "restored");
    const restored = await palaver(["backup", "restore", out, "--to", to]);
    expect(restored.code, restored.stderr).toBe(0);
    await harness.kill(gateway);

    const newConfig = JSON.parse(await readFile(join(to, "config.json"), "utf8")) as {
      agents: { defaults: { workspace: string } };
    };
    expect(newConfig.agents.defaults.workspace).toBe(join(to, "workspace"));
    expect(await readFile(join(to, "workspace", "memory", "MEMORY.md"), "utf8")).toBe(
      "# Memory\n- likes tea\n",
    );
    expect(await readFile(join(to, "cron", "jobs.json"), "utf8")).toBe(
      await readFile(join(dir, "cron", "jobs.json"), "utf8"),
    );
    expect(new PairingStore(pairingPath(to)).isApproved("telegram", "77")).toBe(true);
    // Each restored session is what the original held when the backup read it: a whole-line prefix.
    const before = await sessionsOf(ws);
    const after = await sessionsOf(join(to, "workspace"));
    expect([...after.keys()].sort()).toEqual([...before.keys()].sort());
    for (const [name, text] of after) {
      expect(before.get(name)!.startsWith(text)).toBe(true);
      expect(text === "" || text.endsWith("\n")).toBe(true);
    }
    expect([...after.values()].join("")).toContain("echo first words");
    await expect(readFile(join(to, "gateway.lock"))).rejects.toThrow();

    // A gateway on the restored folder carries the old conversation on.
    const served = llm.requests.length;
    harness.spawnGateway({ configPath: join(to, "config.json") });
    tg.userMessage({ text: "after the move" });
    await tg.waitForSent((m) => m.text === "echo after the move", 30_000);
    expect(llm.requests.length).toBeGreaterThan(served);
    expect(JSON.stringify(llm.requests.at(-1)!.body.messages)).toContain("first words");
  });
});
