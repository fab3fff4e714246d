/**
 * `palaver chat -m` has nobody to ask: a call that needs an approval is denied at once (no prompt
 * that would wait for the timeout), the model is told why, and the reply comes as usual.
 */
import { existsSync } from "node:fs";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { FakeOpenAI, toolCall } from "../fakes/openai-server.js";
import { runCli } from "../helpers/cli.js";

describe("palaver chat -m and approvals (child process)", { timeout: 60_000 }, () => {
  let dir: string;
  let fake: FakeOpenAI;
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), "palaver-chat-approvals-"));
    fake = await FakeOpenAI.start();
  });
  afterEach(async () => {
    await fake.close();
    await rm(dir, { recursive: true, force: true });
  });

  it("denies a call that needs an approval at once and answers", async () => {
    const configPath = join(dir, "config.json");
    await writeFile(
      configPath,
      JSON.stringify({
        agents: { defaults: { workspace: join(dir, "ws"), model: "fake-model", provider: "custom" } },
        providers: { custom: { apiKey: "k", apiBase: fake.baseURL } },
        tools: { approval: { mode: "risky" }, exec: { sandbox: "off" } },
      }),
    );
    // Not read-only: every approval policy asks for it.
    fake.enqueue(
      { toolCalls: [toolCall("exec", { command: "touch made-anyway" })] },
      { content: "I could not." },
    );
    const result = await runCli(["chat", "--config", configPath, "-m", "make a file"], {
      cwd: dir,
      env: { HOME: dir },
    });
    expect(result.code).toBe(0);
    expect(result.stdout).toBe("I could not.\n");
    const tool = fake.requests[1]!.body.messages.find((m) => m.role === "tool");
    expect(String(tool!.content)).toMatch(/^Error: not approved: .*no one can approve it in this chat/);
    expect(existsSync(join(dir, "ws", "made-anyway"))).toBe(false);
  });
});
