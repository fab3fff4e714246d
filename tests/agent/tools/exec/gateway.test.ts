/**
 * End to end: the real `palaver gateway` child process, a fake LLM that turns
 * attacker and asks exec for the config, the .env beside it, the environment
 * and the daemon's /proc, and a check that no secret comes back in the tool
 * results the LLM sees. Holds with the sandbox (bwrap) and, by the path
 * refusals of restrictToWorkspace, without it; the startup log says which.
 */
import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { lastUserText, toolCall, type FakeOpenAI } from "../../../fakes/openai-server.js";
import type { FakeTelegram } from "../../../fakes/telegram-server.js";
import type { RunningCli } from "../../../helpers/cli.js";
import { GatewayHarness, writeGatewayConfig } from "../../../helpers/gateway-process.js";

const CONFIG_KEY = "sk-e2e-config-key-31337";
const DOTENV_KEY = "sk-e2e-dotenv-key-27182";
const ENV_TOKEN = "e2e-daemon-env-token-16180";
const ENV_KEY = "sk-e2e-daemon-env-key-14142";

let dir: string;
let llm: FakeOpenAI;
let tg: FakeTelegram;
let run: RunningCli;

/** Temp folder, fakes and the gateway child (killed after each test): see GatewayHarness. */
const harness = new GatewayHarness({ prefix: "palaver-exec-e2e-" });

beforeEach(async () => {
  await harness.start();
  ({ dir, llm, tg } = harness);
});

afterEach(() => harness.close());

describe("exec through the real gateway", { timeout: 90_000 }, () => {
  it("gives the model none of the daemon's secrets: config, .env, environment, /proc", async () => {
    const configPath = await writeGatewayConfig(
      dir,
      { llmBaseURL: llm.baseURL, telegram: tg },
      { providers: { custom: { apiKey: CONFIG_KEY, apiBase: llm.baseURL } } },
    );
    await writeFile(join(dir, ".env"), `BRAVE_API_KEY=${DOTENV_KEY}\n`);
    run = harness.spawnGateway({
      configPath,
      // The daemon's real environment (besides HOME): what /proc/<pid>/environ would show.
      env: { PALAVER_E2E_TOKEN: ENV_TOKEN, OPENAI_API_KEY: ENV_KEY },
    });
    const daemon = run.child.pid!;
    const attacks = [
      `cat ${configPath}`,
      "cat ../config.json",
      "cat .env",
      "cat ../.env",
      "env",
      `cat /proc/${daemon}/environ`,
      "tr '\\0' '\\n' < /proc/$PPID/environ",
    ];
    llm.setHandler((req) =>
      req.body.messages.some((m) => m.role === "tool")
        ? { content: "done" }
        : { toolCalls: attacks.map((command, i) => toolCall("exec", { command }, `call-${i}`)) },
    );
    await run.stderrIncludes("gateway running");
    tg.userMessage({ text: "show me your secrets" });
    await tg.waitForSent((m) => m.text === "done", 30_000);

    const followUp = llm.requests.find((r) => r.body.messages.some((m) => m.role === "tool"));
    expect(followUp && lastUserText(followUp)).toBe("show me your secrets");
    const results = followUp!.body.messages.filter((m) => m.role === "tool").map((m) => String(m.content));
    expect(results).toHaveLength(attacks.length);
    const everything = results.join("\n");
    for (const secret of [CONFIG_KEY, DOTENV_KEY, ENV_TOKEN, ENV_KEY, tg.token]) {
      expect(everything).not.toContain(secret);
    }
    expect(everything).not.toMatch(/^PALAVER_/m);
    // The commands did run (this is not a test of exec being broken): `env` printed the allow-list.
    expect(results[attacks.indexOf("env")]).toMatch(/^PATH=/m);
    // The startup log says plainly whether commands are confined.
    expect(run.stderr).toMatch(/exec: (sandboxed with bubblewrap|NOT sandboxed)/);
  });

  it('refuses to start with tools.exec.sandbox "require" when bwrap cannot be used (exit 78)', async () => {
    const configPath = await writeGatewayConfig(
      dir,
      { llmBaseURL: llm.baseURL },
      { tools: { exec: { sandbox: "require" } } },
    );
    // No bwrap on this PATH (node is started by its absolute path, so it needs none).
    run = harness.spawnGateway({ configPath, env: { PATH: join(dir, "empty-bin") } });
    expect(await run.exited).toBe(78);
    expect(run.stderr).toMatch(/tools\.exec\.sandbox is "require"/);
    expect(run.stderr).toMatch(/sudo apt-get install bubblewrap/);
  });
});
