/**
 * An LLM that fails says so in one line on stderr, naming the provider, its address, what happened
 * and the setting that fixes it (issue 35): through the real CLI, against a port where nothing
 * listens and the fake OpenAI server's 401 and 404.
 */
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { FakeOpenAI } from "../fakes/openai-server.js";
import { runCli } from "../helpers/cli.js";

/** A loopback port that was free a moment ago: nothing listens there. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

describe("palaver chat -m when the LLM fails (child process)", () => {
  let dir: string;
  let fake: FakeOpenAI | undefined;
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), "palaver-llm-errors-"));
  });
  afterEach(async () => {
    await fake?.close();
    fake = undefined;
    await rm(dir, { recursive: true, force: true });
  });

  async function chat(apiBase: string): Promise<{ code: number | null; stdout: string; stderr: string }> {
    const configPath = join(dir, "config.json");
    await writeFile(
      configPath,
      JSON.stringify({
        agents: {
          defaults: {
            workspace: join(dir, "ws"),
            model: "fake-model",
            provider: "custom",
            llm: { maxRetries: 2, retryBaseDelay: 0.01, retryMaxDelay: 0.02 },
          },
        },
        providers: { custom: { apiKey: "sk-test-key-123456", apiBase } },
      }),
    );
    return runCli(["chat", "-m", "hi", "--config", configPath], { cwd: dir, env: { HOME: dir } });
  }

  it("a refused port is one line naming the URL and providers.custom.apiBase, exit 1", async () => {
    const url = `http://127.0.0.1:${await closedPort()}/v1`;
    const result = await chat(url);
    expect(result.code).toBe(1);
    expect(result.stdout).toBe("");
    const lines = result.stderr.trimEnd().split("\n");
    expect(lines).toHaveLength(1);
    expect(lines[0]).toContain(url);
    expect(lines[0]).toContain("refused the connection");
    expect(lines[0]).toContain("providers.custom.apiBase");
    // A wrong address is not fixed by waiting.
    expect(lines[0]).not.toMatch(/try again/i);
  });

  it("a 401 names the key setting", async () => {
    fake = await FakeOpenAI.start();
    fake.enqueue({ status: 401 });
    const result = await chat(fake.baseURL);
    expect(result.code).toBe(1);
    const lines = result.stderr.trimEnd().split("\n");
    expect(lines).toHaveLength(1);
    expect(lines[0]).toContain(fake.baseURL);
    expect(lines[0]).toContain("providers.custom.apiKey");
    expect(lines[0]).not.toContain("sk-test-key-123456");
  });

  it("a 404 for the model names the model and agents.defaults.model", async () => {
    fake = await FakeOpenAI.start();
    fake.enqueue({ status: 404 });
    const result = await chat(fake.baseURL);
    expect(result.code).toBe(1);
    const lines = result.stderr.trimEnd().split("\n");
    expect(lines).toHaveLength(1);
    expect(lines[0]).toContain('"fake-model"');
    expect(lines[0]).toContain("agents.defaults.model");
    expect(lines[0]).not.toMatch(/try again/i);
  });
});
