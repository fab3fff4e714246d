import { spawn } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { afterEach, describe, expect, it } from "vitest";

const ROOT = join(import.meta.dirname, "..", "..");
const TSX = pathToFileURL(join(ROOT, "node_modules", "tsx", "dist", "loader.mjs")).href;

describe("palaver gateway (child process)", () => {
  let dir: string;
  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it("keeps running with no channels, says so, and exits 0 on SIGTERM", async () => {
    dir = await mkdtemp(join(tmpdir(), "palaver-gw-"));
    const configPath = join(dir, "config.json");
    await writeFile(
      configPath,
      JSON.stringify({
        agents: { defaults: { workspace: join(dir, "ws"), provider: "custom" } },
        providers: { custom: { apiBase: "http://127.0.0.1:9/v1" } },
        gateway: { port: 0 },
      }),
    );
    const child = spawn(
      process.execPath,
      ["--import", TSX, join(ROOT, "src/main.ts"), "gateway", "--config", configPath],
      {
        cwd: dir,
        env: { PATH: process.env.PATH, HOME: dir },
        stdio: ["ignore", "pipe", "pipe"],
      },
    );
    let stderr = "";
    const running = new Promise<void>((resolve) => {
      child.stderr.on("data", (d: Buffer) => {
        stderr += d.toString();
        if (stderr.includes("gateway running")) resolve();
      });
    });
    const exited = new Promise<number | null>((resolve) => child.on("close", resolve));
    const killer = setTimeout(() => child.kill("SIGKILL"), 15_000);
    try {
      await running;
      // Still alive a moment later: nothing lets the process fall out of its event loop.
      await new Promise((r) => setTimeout(r, 300));
      expect(child.exitCode).toBeNull();
      child.kill("SIGTERM");
      expect(await exited).toBe(0);
    } finally {
      clearTimeout(killer);
    }
    expect(stderr).toMatch(/no channels are running/);
  });

  it("keeps running with the old config when SIGHUP finds the new one invalid", async () => {
    dir = await mkdtemp(join(tmpdir(), "palaver-gw-"));
    const configPath = join(dir, "config.json");
    await writeFile(
      configPath,
      JSON.stringify({
        agents: { defaults: { workspace: join(dir, "ws"), provider: "custom" } },
        providers: { custom: { apiBase: "http://127.0.0.1:9/v1" } },
        gateway: { port: 0 },
      }),
    );
    const child = spawn(
      process.execPath,
      ["--import", TSX, join(ROOT, "src/main.ts"), "gateway", "--config", configPath],
      {
        cwd: dir,
        env: { PATH: process.env.PATH, HOME: dir },
        stdio: ["ignore", "pipe", "pipe"],
      },
    );
    let stderr = "";
    const seen = (text: string) =>
      new Promise<void>((resolve) => {
        const check = () => stderr.includes(text) && resolve();
        child.stderr.on("data", check);
        check();
      });
    child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
    const exited = new Promise<number | null>((resolve) => child.on("close", resolve));
    const killer = setTimeout(() => child.kill("SIGKILL"), 15_000);
    try {
      await seen("gateway running");
      await writeFile(configPath, JSON.stringify({ agents: { defaults: { maxTokens: "lots" } } }));
      child.kill("SIGHUP");
      await seen("config reload refused");
      expect(stderr).toMatch(/agents\.defaults\.maxTokens/);
      expect(child.exitCode).toBeNull();
      child.kill("SIGTERM");
      expect(await exited).toBe(0);
    } finally {
      clearTimeout(killer);
    }
    expect(stderr).toMatch(/stopped/);
  });
});
