/**
 * The real `palaver gateway` as a child process against loopback fakes:
 * a config naming FakeOpenAI and any of FakeTelegram, FakeSlack and
 * FakeDiscord, and the health endpoint's address read from the child's log.
 * Used by the crash tests and the startup and throughput benchmarks.
 */
import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import type { FakeDiscord } from "../fakes/discord-server.js";
import type { FakeSlack } from "../fakes/slack-server.js";
import type { FakeTelegram } from "../fakes/telegram-server.js";

export interface GatewayFakes {
  /** FakeOpenAI's baseURL (or that of a fake LLM in another process). */
  llmBaseURL: string;
  telegram?: FakeTelegram;
  slack?: FakeSlack;
  discord?: FakeDiscord;
}

type Json = Record<string, unknown>;

/**
 * A gateway config for `dir` (workspace `dir/ws`, health endpoint on a free
 * port, heartbeat off, every sender allowed) with the given fakes enabled;
 * `overrides` is merged in deeply.
 */
export function gatewayConfig(dir: string, fakes: GatewayFakes, overrides: Json = {}): Json {
  const channels: Json = { sendProgress: false, sendToolHints: false };
  if (fakes.telegram) {
    channels.telegram = {
      enabled: true,
      token: fakes.telegram.token,
      apiRoot: fakes.telegram.apiRoot,
      allowFrom: ["*"],
      pollTimeout: 5,
    };
  }
  if (fakes.slack) {
    channels.slack = {
      enabled: true,
      mode: "socket",
      botToken: fakes.slack.botToken,
      appToken: fakes.slack.appToken,
      apiUrl: fakes.slack.apiUrl,
      allowFrom: ["*"],
    };
  }
  if (fakes.discord) {
    channels.discord = {
      enabled: true,
      token: fakes.discord.token,
      apiUrl: fakes.discord.apiUrl,
      allowFrom: ["*"],
    };
  }
  const base: Json = {
    agents: {
      defaults: {
        workspace: join(dir, "ws"),
        provider: "custom",
        model: "fake-model",
        llm: { maxRetries: 0, timeout: 60 },
      },
    },
    providers: { custom: { apiKey: "sk-fake", apiBase: fakes.llmBaseURL } },
    channels,
    gateway: { host: "127.0.0.1", port: 0, heartbeat: { enabled: false } },
  };
  return deepMerge(base, overrides);
}

/** Writes gatewayConfig(...) to `dir/config.json` and returns the path. */
export async function writeGatewayConfig(
  dir: string,
  fakes: GatewayFakes,
  overrides: Json = {},
): Promise<string> {
  const path = join(dir, "config.json");
  await writeFile(path, `${JSON.stringify(gatewayConfig(dir, fakes, overrides), null, 2)}\n`);
  return path;
}

/** The health endpoint's URL from the gateway's JSON log ("health endpoint listening"), once logged. */
export function healthUrlFromLog(stderr: string): string | undefined {
  for (const line of stderr.split("\n")) {
    if (!line.includes("health endpoint listening")) continue;
    try {
      const entry = JSON.parse(line) as { url?: unknown };
      if (typeof entry.url === "string") return entry.url;
    } catch {
      // not a JSON log line (pretty logging): keep looking
    }
  }
  return undefined;
}

function isObject(v: unknown): v is Json {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

function deepMerge(base: Json, extra: Json): Json {
  const out: Json = { ...base };
  for (const [key, value] of Object.entries(extra)) {
    const current = out[key];
    out[key] = isObject(current) && isObject(value) ? deepMerge(current, value) : value;
  }
  return out;
}
