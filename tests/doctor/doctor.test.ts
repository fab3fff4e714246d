/**
 * `palaver doctor`: each check fails on its own broken setup with its fix line, against the
 * loopback fakes (the real grammy and openai clients ask them).
 */
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { formatChecks } from "../../src/cli/doctor.js";
import { serviceCheck } from "../../src/cli/doctor-service.js";
import { runDoctor } from "../../src/doctor/doctor.js";
import type { CheckResult } from "../../src/doctor/types.js";
import { FakeDiscord } from "../fakes/discord-server.js";
import { FakeOpenAI } from "../fakes/openai-server.js";
import { FakeSlack } from "../fakes/slack-server.js";
import { FakeTelegram } from "../fakes/telegram-server.js";

let dir: string;
let llm: FakeOpenAI;
let telegram: FakeTelegram;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), "palaver-doctor-"));
  llm = await FakeOpenAI.start();
  telegram = await FakeTelegram.start();
});
afterEach(async () => {
  await llm.close();
  await telegram.close();
  await rm(dir, { recursive: true, force: true });
});

/** A config in `stateDir` (the state folder is the config's folder); `over` replaces sections. */
async function doctor(
  over: Record<string, unknown> = {},
  stateDir = join(dir, "state"),
  PATH = process.env.PATH,
) {
  await mkdir(stateDir, { recursive: true, mode: 0o700 }).catch(() => undefined);
  const configPath = join(stateDir, "config.json");
  const config = {
    agents: { defaults: { workspace: join(dir, "ws"), provider: "custom", model: "fake-model" } },
    providers: { custom: { apiKey: "k", apiBase: llm.baseURL } },
    channels: {
      telegram: { enabled: true, token: telegram.token, apiRoot: telegram.apiRoot, allowFrom: ["1"] },
    },
    gateway: { port: 0 },
    tools: { exec: { sandbox: "require" } },
    ...over,
  };
  await writeFile(configPath, JSON.stringify(config)).catch(() => undefined);
  return runDoctor({ configPath, env: { PATH, HOME: dir, PALAVER_SYSTEMD_DIR: join(dir, "systemd") } });
}

const byName = (results: CheckResult[], name: string) => results.find((r) => r.name === name);

/** An address where nothing listens: connections are refused at once. */
const NOBODY = "http://127.0.0.1:9";

describe("palaver doctor", () => {
  it("passes a working setup, with the LLM's latency and the clock compared", async () => {
    const results = await doctor();
    expect(byName(results, "telegram token")).toMatchObject({ status: "ok" });
    expect(byName(results, "llm")?.detail).toMatch(/fake-model .* answered in \d+ ms/);
    expect(byName(results, "clock")?.status).toBe("ok");
    expect(byName(results, "state folder")?.status).toBe("ok");
    expect(byName(results, "sandbox")?.status).toBe("ok");
    expect(llm.requests).toHaveLength(1);
  });

  it("fails a bad Telegram token, with where to get a good one", async () => {
    const results = await doctor({
      channels: {
        telegram: { enabled: true, token: "123:wrong", apiRoot: telegram.apiRoot, allowFrom: ["1"] },
      },
    });
    const line = byName(results, "telegram token");
    expect(line?.status).toBe("fail");
    expect(line?.detail).toMatch(/getMe failed.*Unauthorized/);
    expect(line?.fix).toMatch(/@BotFather/);
    expect(formatChecks(results)).toMatch(/FAIL\s+telegram token/);
  });

  it("warns, not fails, when the Telegram API cannot be reached: the token was not checked", async () => {
    const results = await doctor({
      channels: { telegram: { enabled: true, token: telegram.token, apiRoot: NOBODY, allowFrom: ["1"] } },
    });
    const line = byName(results, "telegram token");
    expect(line?.status).toBe("warn");
    expect(line?.detail).toContain(NOBODY);
    expect(line?.fix).toMatch(/could not reach the API.*channels\.telegram\.apiRoot/);
  });

  describe("Slack and Discord tokens against their APIs", () => {
    let slack: FakeSlack;
    let discord: FakeDiscord;
    beforeEach(async () => {
      slack = await FakeSlack.start();
      discord = await FakeDiscord.start();
    });
    afterEach(async () => {
      await slack.close();
      await discord.close();
    });

    const slackSection = (botToken: string, apiUrl: string) => ({
      enabled: true,
      botToken,
      appToken: slack.appToken,
      apiUrl,
      allowFrom: ["U1"],
    });
    const discordSection = (token: string, apiUrl: string) => ({
      enabled: true,
      token,
      apiUrl,
      allowFrom: ["1"],
    });

    it("fails a Slack token the API rejects, with where to set a good one", async () => {
      const results = await doctor({
        channels: {
          slack: slackSection("xoxb-revoked", slack.apiUrl),
          discord: discordSection(discord.token, discord.apiUrl),
        },
      });
      // Each check on its own: the good Discord token passes with the bot's name beside it.
      expect(byName(results, "discord token")).toMatchObject({
        status: "ok",
        detail: expect.stringMatching(/^bot \S+/) as unknown,
      });
      const line = byName(results, "slack token");
      expect(line?.status).toBe("fail");
      expect(line?.detail).toMatch(/invalid_auth/);
      expect(line?.fix).toMatch(/^token rejected: set channels\.slack\.botToken/);
      expect(formatChecks(results)).toMatch(/FAIL\s+slack token/);
    });

    it("fails a Discord token the API rejects (401), with where to set a good one", async () => {
      const results = await doctor({
        channels: { discord: discordSection("not-the-token", discord.apiUrl) },
      });
      const line = byName(results, "discord token");
      expect(line?.status).toBe("fail");
      expect(line?.detail).toMatch(/401/);
      expect(line?.fix).toMatch(/^token rejected: set channels\.discord\.token/);
    });

    it("warns when Slack or Discord cannot be reached, naming the address", async () => {
      const results = await doctor({
        channels: {
          slack: slackSection(slack.botToken, `${NOBODY}/api/`),
          discord: discordSection(discord.token, `${NOBODY}/api`),
        },
      });
      const slackLine = byName(results, "slack token");
      expect(slackLine?.status).toBe("warn");
      expect(slackLine?.detail).toContain(NOBODY);
      expect(slackLine?.fix).toMatch(/channels\.slack\.apiUrl/);
      const discordLine = byName(results, "discord token");
      expect(discordLine?.status).toBe("warn");
      expect(discordLine?.detail).toContain(NOBODY);
      expect(discordLine?.fix).toMatch(/channels\.discord\.apiUrl/);
    });
  });

  it("fails without bubblewrap on PATH when the sandbox is required", async () => {
    const results = await doctor({}, join(dir, "state"), join(dir, "empty-bin"));
    expect(byName(results, "sandbox")?.status).toBe("fail");
    expect(byName(results, "sandbox")?.fix).toMatch(/apt-get install bubblewrap/);
  });

  it("fails an unreachable LLM, naming the address to check", async () => {
    const results = await doctor({
      providers: { custom: { apiKey: "k", apiBase: "http://127.0.0.1:9/v1" } },
    });
    expect(byName(results, "llm")?.status).toBe("fail");
    expect(byName(results, "llm")?.fix).toContain("http://127.0.0.1:9/v1 is reachable");
  });

  it("fails a state folder that cannot be written (a path under a file: tests run as root)", async () => {
    await writeFile(join(dir, "a-file"), "");
    const results = await runDoctor({
      configPath: join(dir, "a-file", "state", "config.json"),
      env: { PATH: process.env.PATH, HOME: dir, PALAVER_SYSTEMD_DIR: join(dir, "systemd") },
    });
    const line = byName(results, "state folder");
    expect(line?.status).toBe("fail");
    expect(line?.detail).toContain("ENOTDIR");
    expect(line?.fix).toMatch(/a folder the user palaver runs as can write/);
  });

  it("warns when no systemd unit is installed, or one runs another config", async () => {
    const env = { PALAVER_SYSTEMD_DIR: join(dir, "systemd") };
    const none = await serviceCheck(join(dir, "config.json"), env);
    expect(none.status).toBe("warn");
    expect(none.fix).toMatch(/palaver service install/);
    await mkdir(join(dir, "systemd"));
    await writeFile(
      join(dir, "systemd", "palaver.service"),
      "ExecStart=/usr/bin/node main.js gateway --config /elsewhere.json\n",
    );
    const other = await serviceCheck(join(dir, "config.json"), env);
    expect(other.detail).toMatch(/runs another config/);
  });
});
