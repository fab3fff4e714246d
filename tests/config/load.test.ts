import { mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { homedir, tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { findJsonError } from "../../src/config/json-errors.js";
import { configJsonSchema, loadConfig, type LoadConfigOptions } from "../../src/config/load.js";
import { ConfigSchema, defaultConfig } from "../../src/config/schema.js";
import { ConfigError } from "../../src/util/errors.js";

const FIXTURE = join(dirname(fileURLToPath(import.meta.url)), "..", "fixtures", "nanobot", "config.json");

let dir: string;
let configPath: string;

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), "palaver-config-"));
  configPath = join(dir, "config.json");
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** Loads with an isolated env and cwd so nothing from the real environment leaks in. */
function load(opts: LoadConfigOptions = {}) {
  return loadConfig({ configPath, env: {}, cwd: dir, ...opts });
}

async function writeConfig(value: unknown): Promise<void> {
  await writeFile(configPath, typeof value === "string" ? value : JSON.stringify(value, null, 2));
}

function loadError(opts: LoadConfigOptions = {}): ConfigError {
  try {
    load(opts);
  } catch (err) {
    if (err instanceof ConfigError) return err;
    throw err;
  }
  throw new Error("expected a ConfigError");
}

describe("loadConfig: defaults and file", () => {
  it("uses the schema defaults when the file is missing, and says so for an explicit path", () => {
    const loaded = load();
    expect(loaded.exists).toBe(false);
    expect(loaded.path).toBe(configPath);
    expect(loaded.workspace).toBe(join(homedir(), ".palaver", "workspace"));
    const expected = defaultConfig();
    expected.agents.defaults.workspace = loaded.workspace;
    expect(loaded.config).toEqual(expected);
    expect(loaded.warnings).toEqual([`config file ${configPath} does not exist; using defaults`]);
  });

  it("defaults to ~/.palaver/config.json, or $PALAVER_CONFIG, without a warning", async () => {
    const viaDefault = loadConfig({ env: {}, cwd: dir, loadDotenv: false });
    expect(viaDefault.path).toBe(join(homedir(), ".palaver", "config.json"));

    await writeConfig({ agents: { defaults: { model: "from-env-path" } } });
    const viaEnv = loadConfig({ env: { PALAVER_CONFIG: configPath }, cwd: dir });
    expect(viaEnv.path).toBe(configPath);
    expect(viaEnv.exists).toBe(true);
    expect(viaEnv.config.agents.defaults.model).toBe("from-env-path");
    expect(viaEnv.warnings).toEqual([]);
  });

  it("lets the file override defaults and keeps the other defaults", async () => {
    await writeConfig({
      agents: { defaults: { model: "deepseek-chat", maxTokens: 1024 } },
      channels: { telegram: { enabled: true, allowFrom: [42, "43"] } },
      gateway: { port: 9999 },
    });
    const { config, exists, warnings } = load();
    expect(exists).toBe(true);
    expect(warnings).toEqual([]);
    expect(config.agents.defaults.model).toBe("deepseek-chat");
    expect(config.agents.defaults.maxTokens).toBe(1024);
    expect(config.agents.defaults.temperature).toBe(0.1);
    expect(config.agents.defaults.llm.maxRetries).toBe(3);
    expect(config.channels.telegram.enabled).toBe(true);
    expect(config.channels.telegram.allowFrom).toEqual(["42", "43"]);
    expect(config.channels.slack.mode).toBe("socket");
    expect(config.gateway).toEqual({
      host: "127.0.0.1",
      port: 9999,
      heartbeat: { enabled: true, intervalSeconds: 1800 },
    });
  });

  it("treats an empty file as defaults, with a warning", async () => {
    await writeConfig("  \n");
    const loaded = load();
    expect(loaded.exists).toBe(true);
    expect(loaded.config.agents.defaults.model).toBe("gpt-4o-mini");
    expect(loaded.warnings).toEqual([`config file ${configPath} is empty; using defaults`]);
  });

  it("accepts a file starting with a byte order mark", async () => {
    await writeConfig('\uFEFF{"gateway": {"port": 1234}}');
    expect(load().config.gateway.port).toBe(1234);
  });
});

describe("loadConfig: workspace", () => {
  it("--workspace wins and resolves against cwd; it is written back into the config", async () => {
    await writeConfig({ agents: { defaults: { workspace: "/somewhere/else" } } });
    const loaded = load({ workspace: "ws" });
    expect(loaded.workspace).toBe(join(dir, "ws"));
    expect(loaded.config.agents.defaults.workspace).toBe(join(dir, "ws"));
  });

  it("expands ~ and resolves a relative configured workspace against the config's folder", async () => {
    await writeConfig({ agents: { defaults: { workspace: "~/bot" } } });
    expect(load().workspace).toBe(join(homedir(), "bot"));
    await writeConfig({ agents: { defaults: { workspace: "./data/ws" } } });
    expect(load({ cwd: tmpdir() }).workspace).toBe(join(dir, "data", "ws"));
  });
});

describe("loadConfig: environment overrides", () => {
  it("maps PALAVER_A__B__C to schema keys, parsing numbers and booleans", async () => {
    await writeConfig({ agents: { defaults: { maxTokens: 100, model: "file-model" } } });
    const { config, warnings } = load({
      env: {
        PALAVER_AGENTS__DEFAULTS__MAX_TOKENS: "4096",
        PALAVER_AGENTS__DEFAULTS__TEMPERATURE: "0.5",
        PALAVER_TOOLS__RESTRICT_TO_WORKSPACE: "false",
        PALAVER_CHANNELS__SLACK__ENABLED: "true",
        PALAVER_CHANNELS__SLACK__MODE: "http",
        PALAVER_GATEWAY__HEARTBEAT__INTERVAL_S: "60",
        PALAVER_TOOLS__WEB__FETCH__MAX_CHARS: "1000",
      },
    });
    expect(warnings).toEqual([]);
    expect(config.agents.defaults.maxTokens).toBe(4096);
    expect(config.agents.defaults.temperature).toBe(0.5);
    expect(config.agents.defaults.model).toBe("file-model");
    expect(config.tools.restrictToWorkspace).toBe(false);
    expect(config.channels.slack.enabled).toBe(true);
    expect(config.channels.slack.mode).toBe("http");
    expect(config.gateway.heartbeat.intervalSeconds).toBe(60);
    expect(config.tools.web.fetch.maxChars).toBe(1000);
  });

  it("creates record entries with lowercased names and fills the rest from defaults", () => {
    const { config } = load({
      env: {
        PALAVER_PROVIDERS__OPENROUTER__API_KEY: "sk-or-secret",
        PALAVER_PROVIDERS__DEEPSEEK__API_KEY: "123456",
        PALAVER_PROVIDERS__DEEPSEEK__API_BASE: "http://127.0.0.1:9/v1",
      },
    });
    expect(config.providers.openrouter).toEqual({
      apiKey: "sk-or-secret",
      apiBase: null,
      extraHeaders: null,
    });
    // A key made of digits stays a string: the schema wants a string there.
    expect(config.providers.deepseek).toEqual({
      apiKey: "123456",
      apiBase: "http://127.0.0.1:9/v1",
      extraHeaders: null,
    });
  });

  it("reaches a record entry already in the file whatever its spelling", async () => {
    await writeConfig({ providers: { githubCopilot: { apiKey: "old" }, OpenAI: { apiKey: "old" } } });
    const { config } = load({
      env: { PALAVER_PROVIDERS__GITHUB_COPILOT__API_KEY: "new1", PALAVER_PROVIDERS__OPENAI__API_KEY: "new2" },
    });
    expect(Object.keys(config.providers).sort()).toEqual(["OpenAI", "githubCopilot"]);
    expect(config.providers.githubCopilot!.apiKey).toBe("new1");
    expect(config.providers.OpenAI!.apiKey).toBe("new2");
  });

  it("takes lists as JSON or comma-separated, and objects as JSON", () => {
    const { config } = load({
      env: {
        PALAVER_CHANNELS__TELEGRAM__ALLOW_FROM: "123, 456",
        PALAVER_CHANNELS__DISCORD__ALLOW_FROM: '["7", 8]',
        PALAVER_PROVIDERS__X__EXTRA_HEADERS: '{"X-Title": "palaver"}',
        PALAVER_TOOLS__WEB__PROXY: "null",
      },
    });
    expect(config.channels.telegram.allowFrom).toEqual(["123", "456"]);
    expect(config.channels.discord.allowFrom).toEqual(["7", "8"]);
    expect(config.providers.x!.extraHeaders).toEqual({ "X-Title": "palaver" });
    expect(config.tools.web.proxy).toBeNull();
  });

  it("warns about variables that name no config key, and about single-underscore typos", () => {
    const { warnings, config } = load({
      env: {
        PALAVER_AGENTS__DEFAULTS__NOPE: "1",
        PALAVER_NOTHING__HERE: "x",
        PALAVER_AGENTS_DEFAULTS_MODEL: "typo",
        PALAVER_GATEWAY__PORT__DEEPER: "1",
        PALAVER_CONFIG: configPath,
        PALAVER_LOG_LEVEL: "debug",
        PALAVER_TEST: "1",
        OTHER__THING: "x",
      },
    });
    expect(warnings).toEqual([
      `config file ${configPath} does not exist; using defaults`,
      "environment variable PALAVER_AGENTS_DEFAULTS_MODEL is ignored: separate levels with double underscores",
      "environment variable PALAVER_AGENTS__DEFAULTS__NOPE names no config key (ignored)",
      "environment variable PALAVER_GATEWAY__PORT__DEEPER names no config key (ignored)",
      "environment variable PALAVER_NOTHING__HERE names no config key (ignored)",
    ]);
    expect(config.agents.defaults.model).toBe("gpt-4o-mini");
  });

  it("names the variable when its value is invalid", () => {
    const err = loadError({ env: { PALAVER_AGENTS__DEFAULTS__MAX_TOKENS: "lots" } });
    expect(err.problems).toEqual([
      'agents.defaults.maxTokens: expected a number, got "lots" (from PALAVER_AGENTS__DEFAULTS__MAX_TOKENS)',
    ]);
  });
});

describe("loadConfig: .env files", () => {
  it("loads .env beside the config and in cwd into env, never overriding set variables", async () => {
    const configDir = join(dir, "conf");
    const cwd = join(dir, "project");
    await mkdir(configDir);
    await mkdir(cwd);
    const path = join(configDir, "config.json");
    await writeFile(path, "{}");
    await writeFile(
      join(configDir, ".env"),
      "PALAVER_PROVIDERS__OPENAI__API_KEY=sk-from-dotenv\nPALAVER_AGENTS__DEFAULTS__MODEL=beside-model\nSHARED=beside\n",
    );
    await writeFile(
      join(cwd, ".env"),
      "PALAVER_GATEWAY__PORT=4321\nSHARED=cwd\nPALAVER_AGENTS__DEFAULTS__MODEL=cwd\n",
    );
    const env: NodeJS.ProcessEnv = { PALAVER_AGENTS__DEFAULTS__MODEL: "real-env-model" };

    const { config } = loadConfig({ configPath: path, env, cwd });
    expect(config.providers.openai!.apiKey).toBe("sk-from-dotenv");
    expect(config.gateway.port).toBe(4321);
    expect(config.agents.defaults.model).toBe("real-env-model");
    // The file beside the config wins over the one in cwd; both land in env.
    expect(env.SHARED).toBe("beside");
    expect(env.PALAVER_AGENTS__DEFAULTS__MODEL).toBe("real-env-model");
    expect(env.PALAVER_GATEWAY__PORT).toBe("4321");
  });

  it("skips .env files with loadDotenv: false", async () => {
    await writeFile(join(dir, ".env"), "PALAVER_GATEWAY__PORT=4321\n");
    const env: NodeJS.ProcessEnv = {};
    expect(load({ env, loadDotenv: false }).config.gateway.port).toBe(18790);
    expect(env).toEqual({});
    expect(load({ env }).config.gateway.port).toBe(4321);
  });
});

describe("loadConfig: unknown and snake_case keys", () => {
  it("warns once per unknown key, by full path, and drops it", async () => {
    await writeConfig({
      agents: { defaults: { model: "m", sillyKnob: 1 } },
      channels: { whatsapp: { enabled: true, deep: { deeper: 1 } }, telegram: { bogus: true } },
      providers: { openai: { apiKey: "k", organisation: "x" } },
      tools: { mcpServers: { fs: { command: "npx", type: "stdio" } } },
      audio: {},
    });
    const { warnings, config } = load();
    expect(warnings).toEqual([
      "unknown key agents.defaults.sillyKnob (ignored)",
      "unknown key channels.whatsapp (ignored)",
      "unknown key channels.telegram.bogus (ignored)",
      "unknown key providers.openai.organisation (ignored)",
      "unknown key tools.mcpServers.fs.type (ignored)",
      "unknown key audio (ignored)",
    ]);
    expect(config.agents.defaults.model).toBe("m");
    expect(config.tools.mcpServers.fs!.command).toBe("npx");
    expect(JSON.stringify(config)).not.toContain("whatsapp");
  });

  it("accepts nanobot's snake_case keys, leaving record keys alone", async () => {
    await writeConfig({
      agents: { defaults: { max_tokens: 2048, max_tool_iterations: 7, memory_window: 30 } },
      providers: {
        dashscope_coding_plan: {
          api_key: "sk-dash",
          api_base: "http://127.0.0.1:1/v1",
          extra_headers: { X_Custom: "v" },
        },
      },
      channels: { send_progress: false, telegram: { allow_from: ["1"], reply_to_message: true } },
      tools: {
        restrict_to_workspace: false,
        mcp_servers: { my_server: { command: "x", tool_timeout: 5, env: { API_TOKEN: "t" } } },
        web: { search: { api_key: "brave", max_results: 3 } },
      },
      gateway: { heartbeat: { interval_s: 60 } },
    });
    const { config, warnings } = load();
    expect(warnings).toEqual([]);
    expect(config.agents.defaults.maxTokens).toBe(2048);
    expect(config.agents.defaults.maxToolIterations).toBe(7);
    expect(config.agents.defaults.memoryWindow).toBe(30);
    expect(config.providers.dashscope_coding_plan).toEqual({
      apiKey: "sk-dash",
      apiBase: "http://127.0.0.1:1/v1",
      extraHeaders: { X_Custom: "v" },
    });
    expect(config.channels.sendProgress).toBe(false);
    expect(config.channels.telegram.allowFrom).toEqual(["1"]);
    expect(config.channels.telegram.replyToMessage).toBe(true);
    expect(config.tools.restrictToWorkspace).toBe(false);
    expect(config.tools.mcpServers.my_server!.toolTimeout).toBe(5);
    expect(config.tools.mcpServers.my_server!.env).toEqual({ API_TOKEN: "t" });
    expect(config.tools.web.search).toEqual({ apiKey: "brave", maxResults: 3 });
    expect(config.gateway.heartbeat.intervalSeconds).toBe(60);
  });

  it("prefers the camelCase key when both spellings are given", async () => {
    await writeConfig({ agents: { defaults: { maxTokens: 1, max_tokens: 2 } } });
    const { config, warnings } = load();
    expect(config.agents.defaults.maxTokens).toBe(1);
    expect(warnings).toEqual(["both agents.defaults.max_tokens and maxTokens are set; using maxTokens"]);
  });

  it("accepts a real nanobot config.json unchanged", async () => {
    const { config, warnings } = load({ configPath: FIXTURE });
    expect(warnings).toEqual([
      "unknown key channels.whatsapp (ignored)",
      "unknown key channels.feishu (ignored)",
      "unknown key audio (ignored)",
    ]);
    const d = config.agents.defaults;
    expect(d.workspace).toBe(join(homedir(), ".nanobot", "workspace"));
    expect(d.model).toBe("anthropic/claude-opus-4-5");
    expect([d.maxTokens, d.temperature, d.maxToolIterations, d.memoryWindow]).toEqual([8192, 0.7, 20, 50]);
    expect(config.providers.openrouter).toEqual({
      apiKey: "sk-or-v1-fake-openrouter-key-0002",
      apiBase: null,
      extraHeaders: null,
    });
    expect(config.providers.anthropic!.apiKey).toBe("sk-ant-fake-anthropic-key-0001");
    expect(config.providers.deepseek!.apiKey).toBe("sk-fake-deepseek-key-0003");
    expect(config.providers.aihubmix!.extraHeaders).toEqual({ "APP-Code": "fake-app-code-0004" });
    expect(config.providers.vllm!.apiBase).toBe("http://localhost:8000/v1");
    expect(config.channels.telegram).toMatchObject({
      enabled: true,
      token: "123456789:AAFakeTelegramTokenForTestsOnly_abcdefgh",
      allowFrom: ["123456"],
      proxy: null,
      replyToMessage: true,
    });
    expect(config.channels.discord.enabled).toBe(false);
    expect(config.tools.web.search).toEqual({ apiKey: "BSA-fake-brave-key-0005", maxResults: 5 });
    expect(config.tools.exec.timeout).toBe(60);
    expect(config.tools.restrictToWorkspace).toBe(false);
    expect(config.tools.mcpServers).toEqual({});
    expect(config.gateway).toEqual({
      host: "0.0.0.0",
      port: 18790,
      heartbeat: { enabled: true, intervalSeconds: 1800 },
    });
  });
});

describe("loadConfig: errors", () => {
  it("reports every bad path at once with what was expected and what was found", async () => {
    await writeConfig({
      agents: { defaults: { maxTokens: "lots", temperature: 5, memoryWindow: 2.5, reasoningEffort: "max" } },
      providers: { openai: { apiKey: 12345, extraHeaders: { "X-N": 1 } }, broken: "yes" },
      channels: { slack: { mode: "rtm" }, telegram: { allowFrom: ["1", true], proxy: 8080 }, discord: [] },
      tools: { exec: { timeout: -1 }, mcpServers: { m: { transport: "ws" } } },
      gateway: { port: 70000 },
    });
    const err = loadError();
    expect(err.message).toBe(`invalid configuration in ${configPath}`);
    expect([...err.problems].sort()).toEqual(
      [
        'agents.defaults.maxTokens: expected a number, got "lots"',
        "agents.defaults.temperature: expected a number <= 2, got 5",
        "agents.defaults.memoryWindow: expected an integer, got 2.5",
        'agents.defaults.reasoningEffort: expected one of "low", "medium", "high" or null, got "max"',
        "providers.openai.apiKey: expected a string, got a number (hidden)",
        "providers.openai.extraHeaders.X-N: expected a string, got a number (hidden)",
        'providers.broken: expected an object, got "yes"',
        'channels.slack.mode: expected one of "socket", "http", got "rtm"',
        "channels.telegram.allowFrom[1]: expected a string or a number, got true",
        "channels.telegram.proxy: expected a string or null, got 8080",
        "channels.discord: expected an object, got a list",
        "tools.exec.timeout: expected a number > 0, got -1",
        'tools.mcpServers.m.transport: expected one of "streamable-http", "sse", got "ws"',
        "gateway.port: expected a number <= 65535, got 70000",
      ].sort(),
    );
  });

  it("names the line and column of invalid JSON", async () => {
    const cases: [string, number, number, string][] = [
      ['{\n  "a": 1,\n}', 3, 1, "trailing comma before '}'"],
      ['{\n  "a": 1\n  "b": 2\n}', 3, 3, "expected ',' or '}'"],
      ['{\n  "agents": {\n    "defaults": { "model": tru }\n  }\n}', 3, 28, 'unexpected character "t"'],
      ['{\n  "a": "line\nbreak"\n}', 2, 13, "line break or control character inside a string"],
      ['{\n  "a": [1, 2', 2, 13, "unexpected end of file"],
      ["{ a: 1 }", 1, 3, "expected a property name in double quotes"],
      ['{"a": "unterminated', 1, 20, "unterminated string"],
      ['{"a": 1} x', 1, 10, "unexpected content after the end of the JSON value"],
    ];
    for (const [text, line, column, reason] of cases) {
      await writeConfig(text);
      const err = loadError();
      expect(err.problems, text).toEqual([`invalid JSON at line ${line}, column ${column}: ${reason}`]);
      expect(err.message).toContain(`${configPath}:${line}:${column}`);
    }
  });

  it("finds no error in valid JSON, agreeing with JSON.parse", async () => {
    const fixture = await readFile(FIXTURE, "utf8");
    for (const text of [
      fixture,
      '"x"',
      "[]",
      '{"u": "\\u00e9\\n", "n": -1.5e+3, "z": [true, false, null]}',
    ]) {
      expect(() => {
        JSON.parse(text);
      }).not.toThrow();
      expect(findJsonError(text)).toBeUndefined();
    }
  });

  it("refuses a file that is not a JSON object", async () => {
    await writeConfig("[1, 2]");
    expect(loadError().problems).toEqual(["the file must hold a JSON object ({ ... }), got a list"]);
  });
});

describe("configJsonSchema", () => {
  it("describes the file, with nothing required since everything has a default", () => {
    const schema = configJsonSchema() as {
      type: string;
      required?: string[];
      properties: Record<string, { properties?: Record<string, unknown> }>;
    };
    expect(schema.type).toBe("object");
    expect(schema.required ?? []).toEqual([]);
    expect(Object.keys(schema.properties)).toEqual([
      "$schema",
      "agents",
      "providers",
      "tools",
      "channels",
      "gateway",
      "cron",
      "transcription",
      "memory",
      "pricing",
      "budget",
      "cluster",
    ]);
    expect(Object.keys(schema.properties.channels!.properties!)).toContain("telegram");
  });
});

describe("the settings every platform shares", () => {
  it.each(["telegram", "slack", "discord"] as const)(
    "%s keeps admins and its streaming overrides through parsing",
    (platform) => {
      const config = ConfigSchema.parse({
        channels: { [platform]: { admins: ["9"], streaming: false, streamIntervalMs: 2500 } },
      });
      expect(config.channels[platform]).toMatchObject({
        admins: ["9"],
        streaming: false,
        streamIntervalMs: 2500,
      });
      expect(config.channels.streaming).toBe(true);
    },
  );
});
