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
import { FakeOpenAI } from "../fakes/openai-server.js";
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
