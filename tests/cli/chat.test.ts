import { spawn } from "node:child_process";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { FakeOpenAI } from "../fakes/openai-server.js";

const ROOT = join(import.meta.dirname, "..", "..");
// An absolute loader path: the child runs in a temp folder where "tsx" would not resolve.
const TSX = pathToFileURL(join(ROOT, "node_modules", "tsx", "dist", "loader.mjs")).href;

interface RunResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

function runCli(args: string[], env: NodeJS.ProcessEnv, cwd: string): Promise<RunResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ["--import", TSX, join(ROOT, "src/main.ts"), ...args], {
      cwd,
      env: { PATH: process.env.PATH, ...env },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
    child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
    const timer = setTimeout(() => child.kill("SIGKILL"), 15_000);
    child.on("error", reject);
    child.on("close", (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

describe("palaver chat -m (child process)", () => {
  let dir: string;
  let fake: FakeOpenAI;
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), "palaver-cli-"));
    fake = await FakeOpenAI.start();
  });
  afterEach(async () => {
    await fake.close();
    await rm(dir, { recursive: true, force: true });
  });

  it("prints the reply, persists the session and exits 0", async () => {
    const workspace = join(dir, "ws");
    const configPath = join(dir, "config.json");
    await writeFile(
      configPath,
      JSON.stringify({
        agents: { defaults: { workspace, model: "fake-model", provider: "custom" } },
        providers: { custom: { apiBase: fake.baseURL } },
      }),
    );
    // The key comes from a .env beside the config, as the README tells newcomers.
    await writeFile(join(dir, ".env"), "PALAVER_PROVIDERS__CUSTOM__API_KEY=sk-from-dotenv-123456789\n");
    fake.enqueue({ content: "Hello from the **fake** model." });

    const result = await runCli(["chat", "-m", "hello", "--config", configPath], { HOME: dir }, dir);

    expect(result.stderr).not.toMatch(/sk-from-dotenv/);
    expect(result.code).toBe(0);
    expect(result.stdout).toBe("Hello from the **fake** model.\n");
    expect(fake.requests[0]!.headers.authorization).toBe("Bearer sk-from-dotenv-123456789");
    const session = await readFile(join(workspace, "sessions", "cli_direct.jsonl"), "utf8");
    expect(session).toContain('"content":"hello"');
    expect(session).toContain("Hello from the **fake** model.");
  });
});
