/**
 * The config, onboard and status commands run as real child processes, so exit
 * codes and what lands on stdout/stderr are tested as a user sees them. HOME and
 * PALAVER_CONFIG point into a temp folder: nothing touches the real home.
 */
import { existsSync, readdirSync } from "node:fs";
import { mkdir, mkdtemp, readFile, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join, relative } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { templatesDir } from "../../src/config/paths.js";
import { EXIT_CONFIG } from "../../src/util/errors.js";
import { runCli } from "../helpers/cli.js";

let dir: string;
let home: string;
let configPath: string;

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), "palaver-cli-"));
  home = join(dir, "home");
  await mkdir(home);
  configPath = join(dir, "conf", "config.json");
  await mkdir(dirname(configPath));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

function cli(args: string[], extraEnv: Record<string, string> = {}): Promise<Run> {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith("PALAVER_")) env[k] = v;
  Object.assign(env, { HOME: home, PALAVER_CONFIG: configPath, PALAVER_TEST: "1", NO_COLOR: "1" }, extraEnv);
  // Through the shared helper: a few children at a time, with a generous time limit.
  return runCli(args, { cwd: dir, env });
}

async function writeConfig(value: unknown): Promise<void> {
  await writeFile(configPath, typeof value === "string" ? value : JSON.stringify(value, null, 2));
}

describe("palaver config check", () => {
  it("exits 78 and lists every bad path on stderr", async () => {
    await writeConfig({
      agents: { defaults: { maxTokens: "lots", temperature: -3 } },
      channels: { slack: { mode: "rtm" }, discord: { allowFrom: [1, 2 ** 60] } },
      gateway: { port: "http" },
      tools: { exec: { denyPatterns: ["(unclosed"] } },
      providers: { openai: { apiBase: "https://me:hunter2hunter@llm.example/v1" } },
    });
    const run = await cli(["config", "check", "--config", configPath]);
    expect(run.code).toBe(EXIT_CONFIG);
    expect(run.stderr).toContain(`palaver: invalid configuration in ${configPath}:\n`);
    const lines = run.stderr.split("\n").map((l) => l.trim());
    expect(lines).toContain('agents.defaults.maxTokens: expected a number, got "lots"');
    expect(lines).toContain("agents.defaults.temperature: expected a number >= 0, got -3");
    expect(lines).toContain('channels.slack.mode: expected one of "socket", "http", got "rtm"');
    expect(lines).toContain('gateway.port: expected a number, got "http"');
    // Issue 11: these used to pass here and fail (or leak) later.
    expect(lines).toContainEqual(
      expect.stringMatching(/^channels\.discord\.allowFrom\[1\]: .*write ids as strings/),
    );
    expect(lines).toContainEqual(
      expect.stringMatching(/^tools\.exec\.denyPatterns\[0\]: not a valid regular expression: /),
    );
    expect(lines).toContain(
      "providers.openai.apiBase: put credentials in apiKey or extraHeaders, not in the URL",
    );
    expect(run.stderr).not.toContain("hunter2hunter");
    expect(run.stdout).toBe("");
  });

  it("exits 78 naming the line and column of invalid JSON", async () => {
    await writeConfig('{\n  "agents": {\n    "defaults": { "model": "x", }\n  }\n}\n');
    const run = await cli(["config", "check"]);
    expect(run.code).toBe(EXIT_CONFIG);
    expect(run.stderr).toContain(`palaver: invalid configuration in ${configPath}:`);
    expect(run.stderr).toContain("invalid JSON at line 3, column 33: trailing comma before '}'");
  });

  it("exits 78 when a .env value beside the config is invalid, naming the variable", async () => {
    await writeConfig({});
    await writeFile(join(dirname(configPath), ".env"), "PALAVER_GATEWAY__PORT=lots\n");
    const run = await cli(["config", "check"]);
    expect(run.code).toBe(EXIT_CONFIG);
    expect(run.stderr).toContain('gateway.port: expected a number, got "lots" (from PALAVER_GATEWAY__PORT)');
  });

  it("exits 0 for a good config and prints it with secrets masked, plus the warnings", async () => {
    const openaiKey = "sk-test-openai-key-abcdef123456";
    const telegramToken = "123456789:AAtelegram-token-for-tests-WXYZ";
    await writeConfig({
      agents: { defaults: { model: "gpt-test" } },
      providers: { openai: { apiKey: openaiKey } },
      channels: {
        telegram: { enabled: true, token: telegramToken, proxy: "http://proxyuser:proxy-pass-1@proxy:3128" },
        whatsapp: { enabled: true },
      },
      tools: {
        web: { proxy: "http://webuser:web-pass-2@proxy:3128" },
        mcpServers: { gh: { command: "gh-mcp", env: { GH_PAT: "ghp_plainname_value" } } },
      },
    });
    await writeFile(
      join(dirname(configPath), ".env"),
      "PALAVER_PROVIDERS__GROQ__API_KEY=gsk-from-dotenv-9876\n",
    );
    const run = await cli(["config", "check", "--print", "--config", configPath, "--workspace", "ws"]);
    expect(run.stderr).toBe("");
    expect(run.code).toBe(0);
    // The verdict first; the effective config only because --print asked for it.
    expect(run.stdout.split("\n")[0]).toBe("Configuration is valid, with warnings (below).");
    expect(run.stdout).toContain(`Config: ${configPath}\n`);
    expect(run.stdout).toContain(`Workspace: ${join(dir, "ws")}\n`);
    expect(run.stdout).toContain("  - unknown key channels.whatsapp (ignored)\n");
    expect(run.stdout).not.toContain(openaiKey);
    expect(run.stdout).not.toContain(telegramToken);
    expect(run.stdout).not.toContain("gsk-from-dotenv-9876");
    for (const secret of ["proxy-pass-1", "web-pass-2", "ghp_plainname_value"]) {
      expect(run.stdout).not.toContain(secret);
    }
    expect(run.stdout).toContain("http://proxyuser:****@proxy:3128");

    const json = run.stdout.slice(run.stdout.indexOf("{"), run.stdout.lastIndexOf("}") + 1);
    const shown = JSON.parse(json) as {
      agents: { defaults: { model: string } };
      providers: Record<string, { apiKey: string }>;
      channels: { telegram: { token: string }; slack: { botToken: string } };
    };
    expect(shown.agents.defaults.model).toBe("gpt-test");
    expect(shown.providers.openai!.apiKey).toBe("****3456");
    expect(shown.providers.groq!.apiKey).toBe("****9876");
    expect(shown.channels.telegram.token).toBe("****WXYZ");
    expect(shown.channels.slack.botToken).toBe("(not set)");
  });

  it("says when there is no config file and the defaults are used", async () => {
    const run = await cli(["config", "check"], { PALAVER_PROVIDERS__OPENAI__API_KEY: "sk-test-real-1" });
    expect(run.code).toBe(0);
    expect(run.stdout.split("\n")[0]).toMatch(/^Configuration is valid/);
    expect(run.stdout).not.toContain("Effective configuration");
    expect(run.stdout).toContain(`Config: (no config file, defaults) [looked for ${configPath}]`);
    expect(run.stdout).toContain(`Workspace: ${join(home, ".palaver", "workspace")}`);
  });
});

describe("palaver config check: named agents", () => {
  it("warns about a broken agent file with its path and line, as `agents check` does; exit 0", async () => {
    const workspace = join(dir, "ws");
    await mkdir(join(workspace, "agents"), { recursive: true });
    const broken = join(workspace, "agents", "broken.md");
    await writeFile(broken, "---\ndescription: Broken\nmaxIterations: lots\n---\nNever loads.\n");
    await writeFile(
      join(workspace, "agents", "good.md"),
      "---\ndescription: Works\ntools: [read_file]\n---\nYou read files.\n",
    );
    await writeConfig({
      agents: { defaults: { workspace } },
      providers: { openai: { apiKey: "sk-test-5" } },
    });

    const run = await cli(["config", "check"]);
    expect(run.stderr).toBe("");
    expect(run.code).toBe(0);
    expect(run.stdout.split("\n")[0]).toBe("Configuration is valid, with warnings (below).");
    const warnings = run.stdout
      .split("\n")
      .filter((l) => l.startsWith("  - "))
      .map((l) => l.slice(4));
    expect(warnings).toHaveLength(1);
    expect(warnings[0]!.startsWith(`${broken}:3: maxIterations: `)).toBe(true);
    // The same line `palaver agents check` prints for it.
    const check = await cli(["agents", "check"]);
    expect(check.code).toBe(1);
    expect(check.stdout.trim()).toBe(warnings[0]);
  });
});

describe("palaver config check: the LLM provider", () => {
  it("says which provider, address, model and rule, and warns when the choice looks wrong", async () => {
    await writeConfig({
      agents: { defaults: { provider: "anthropic", model: "deepseek-chat" } },
      providers: {
        anthropic: { apiKey: "sk-ant-test-1" },
        deepseek: { apiKey: "sk-or-pasted-in-the-wrong-place" },
        mystery: { apiKey: "k-mystery" },
      },
    });
    const run = await cli(["config", "check"]);
    expect(run.code).toBe(0);
    expect(run.stdout).toContain(
      'LLM: anthropic at https://api.anthropic.com/v1/ with model deepseek-chat (agents.defaults.provider is "anthropic")\n',
    );
    const warnings = run.stdout
      .split("\n")
      .filter((l) => l.startsWith("  - "))
      .map((l) => l.slice(4));
    expect(warnings).toEqual([
      'providers.deepseek.apiKey looks like a key for openrouter (it starts with "sk-or-")',
      "providers.mystery has an apiKey but palaver does not know its address: set providers.mystery.apiBase",
      'the model "deepseek-chat" looks like deepseek\'s ("deepseek") and providers.deepseek has a key, ' +
        'but it is sent to anthropic: set agents.defaults.provider to "deepseek" or "auto"',
    ]);
    expect(run.stdout).not.toContain("sk-ant-test-1");
  });

  it("says when no provider can be used", async () => {
    await writeConfig({ providers: { vllm: {}, anthropic: { apiKey: "" } } });
    const run = await cli(["config", "check"]);
    expect(run.code).toBe(0);
    expect(run.stdout).toContain(
      "LLM: vllm at http://127.0.0.1:8000/v1 with model gpt-4o-mini (no provider has an API key; this one needs none)",
    );
  });
});

describe("palaver config check: an enabled platform that cannot work", () => {
  /** A usable LLM, so what is reported is the platform's problem (the LLM is checked first, as the gateway does). */
  const LLM_KEY = { PALAVER_PROVIDERS__OPENAI__API_KEY: "sk-test-real-4" };

  /** The problem lines of a failed check (stderr, one per line, indented). */
  function problemLines(run: Run): string[] {
    return run.stderr
      .split("\n")
      .slice(1)
      .map((l) => l.trim())
      .filter((l) => l !== "");
  }

  it("exits 78 naming each platform's missing token (and nothing for a disabled one)", async () => {
    await writeConfig({
      channels: {
        telegram: { enabled: true, allowFrom: ["1"] },
        slack: { enabled: true, allowFrom: ["U1"] },
        discord: { enabled: true, allowFrom: ["2"], token: "   " },
      },
    });
    const run = await cli(["config", "check"], LLM_KEY);
    expect(run.code).toBe(EXIT_CONFIG);
    expect(run.stdout).toBe("");
    expect(run.stderr).toContain(`palaver: invalid configuration in ${configPath}:\n`);
    expect(problemLines(run)).toEqual([
      expect.stringMatching(/^channels\.telegram\.token is empty: create a bot with @BotFather/),
      expect.stringMatching(/^channels\.slack\.botToken is empty: .*xoxb-/),
      expect.stringMatching(/^channels\.slack\.appToken is empty: Socket Mode needs .*xapp-/),
      expect.stringMatching(/^channels\.discord\.token is empty: /),
    ]);

    // The same sections disabled: nothing to report.
    await writeConfig({ channels: { telegram: { enabled: false }, slack: {}, discord: { token: "" } } });
    const off = await cli(["config", "check"], LLM_KEY);
    expect(off.stderr).toBe("");
    expect(off.code).toBe(0);
    expect(off.stdout).toContain("Configuration is valid.");
  });

  it("exits 78 for Telegram webhook mode without a url and Slack tokens of the wrong kind", async () => {
    await writeConfig({
      channels: {
        telegram: { enabled: true, token: "123:abc", mode: "webhook", webhook: { url: " " } },
        // Each token pasted into the other's place.
        slack: { enabled: true, botToken: "xapp-1-A1-2-bbb", appToken: "xoxb-1-2-ccc" },
      },
    });
    const run = await cli(["config", "check"], LLM_KEY);
    expect(run.code).toBe(EXIT_CONFIG);
    expect(problemLines(run)).toEqual([
      expect.stringMatching(
        /^channels\.telegram\.webhook\.url is empty, but channels\.telegram\.mode is "webhook"/,
      ),
      expect.stringMatching(/^channels\.slack\.botToken must be the Bot User OAuth Token \(xoxb-\.\.\.\)/),
      expect.stringMatching(/^channels\.slack\.appToken must be an app-level token \(xapp-\.\.\.\)/),
    ]);
    // The tokens themselves are never printed.
    expect(run.stderr).not.toContain("xapp-1-A1-2-bbb");
    expect(run.stderr).not.toContain("xoxb-1-2-ccc");
  });

  it("exits 78 for Slack HTTP mode without a signing secret; tokens from .env count", async () => {
    await writeConfig({ channels: { slack: { enabled: true, mode: "http", botToken: "xoxb-1" } } });
    const run = await cli(["config", "check"], LLM_KEY);
    expect(run.code).toBe(EXIT_CONFIG);
    expect(problemLines(run)).toEqual([
      expect.stringMatching(/^channels\.slack\.signingSecret is empty: mode "http" needs the Signing Secret/),
    ]);

    await writeFile(join(dirname(configPath), ".env"), "PALAVER_CHANNELS__SLACK__SIGNING_SECRET=s3cr3t\n");
    const fixed = await cli(["config", "check"], LLM_KEY);
    expect(fixed.stderr).toBe("");
    expect(fixed.code).toBe(0);
  });
});

describe("palaver config schema", () => {
  it("prints a JSON Schema of the config file", async () => {
    const run = await cli(["config", "schema"]);
    expect(run.code).toBe(0);
    const schema = JSON.parse(run.stdout) as {
      $schema: string;
      type: string;
      properties: Record<string, { properties?: Record<string, unknown> }>;
    };
    expect(schema.$schema).toMatch(/json-schema\.org/);
    expect(schema.type).toBe("object");
    expect(Object.keys(schema.properties)).toEqual(
      expect.arrayContaining(["agents", "providers", "tools", "channels", "gateway"]),
    );
    expect(schema.properties.agents!.properties).toHaveProperty("defaults");
  });
});

/** Files under a template folder that onboard copies (everything but the top-level skills/). */
function templateFiles(root: string): string[] {
  if (!existsSync(root)) return [];
  const out: string[] = [];
  const walk = (d: string) => {
    for (const e of readdirSync(d, { withFileTypes: true })) {
      const p = join(d, e.name);
      if (d === root && e.name === "skills") continue;
      if (e.isDirectory()) walk(p);
      else if (e.isFile()) out.push(relative(root, p));
    }
  };
  walk(root);
  return out;
}

describe("palaver onboard", () => {
  it("creates the config and the workspace, and refuses to overwrite without --force", async () => {
    const first = await cli(["onboard"]);
    expect(first.stderr).toBe("");
    expect(first.code).toBe(0);
    const workspace = join(home, ".palaver", "workspace");
    // The starter config, written out: the defaults a new user sees and edits.
    expect(await readFile(configPath, "utf8")).toBe(`{
  "agents": {
    "defaults": {
      "provider": "auto",
      "model": "gpt-4o-mini"
    }
  },
  "providers": {
    "openai": {
      "apiKey": ""
    }
  },
  "channels": {
    "telegram": {
      "enabled": false,
      "token": "",
      "allowFrom": []
    }
  }
}
`);
    for (const sub of ["skills", "sessions", "memory"]) expect(existsSync(join(workspace, sub))).toBe(true);
    for (const file of templateFiles(templatesDir()))
      expect(existsSync(join(workspace, file)), file).toBe(true);
    expect(first.stdout).toContain(`Created ${configPath}`);
    expect(first.stdout).toContain("PALAVER_PROVIDERS__OPENAI__API_KEY=");
    expect(first.stdout).toContain("palaver chat");

    await writeConfig({ agents: { defaults: { model: "mine" } } });
    const second = await cli(["onboard"]);
    expect(second.code).toBe(0);
    expect(second.stdout).toContain(`Kept your config ${configPath}`);
    expect(JSON.parse(await readFile(configPath, "utf8"))).toEqual({
      agents: { defaults: { model: "mine" } },
    });

    const forced = await cli(["onboard", "--force", "--workspace", "other-ws"]);
    expect(forced.code).toBe(0);
    expect(await readFile(configPath, "utf8")).toBe(`{
  "agents": {
    "defaults": {
      "workspace": "${join(dir, "other-ws")}",
      "provider": "auto",
      "model": "gpt-4o-mini"
    }
  },
  "providers": {
    "openai": {
      "apiKey": ""
    }
  },
  "channels": {
    "telegram": {
      "enabled": false,
      "token": "",
      "allowFrom": []
    }
  }
}
`);
    expect(JSON.parse(await readFile(`${configPath}.bak`, "utf8"))).toEqual({
      agents: { defaults: { model: "mine" } },
    });
    expect(existsSync(join(dir, "other-ws", "sessions"))).toBe(true);
    // Issue 11: the config (and its backup, which may hold keys) are owner-only, also when replacing.
    const mode = async (path: string) => (await stat(path)).mode & 0o777;
    expect(await mode(configPath)).toBe(0o600);
    expect(await mode(`${configPath}.bak`)).toBe(0o600);
    expect(await mode(join(dir, "other-ws"))).toBe(0o700);
    expect(await mode(join(dir, "other-ws", "AGENTS.md"))).toBe(0o600);
  });
});

describe("palaver status", () => {
  it("--json reports config, workspace, model, providers, channels, their problems and sessions without secrets", async () => {
    const workspace = join(dir, "ws");
    await mkdir(join(workspace, "sessions"), { recursive: true });
    for (const f of ["telegram_1.jsonl", "cli_direct.jsonl", "notes.txt"]) {
      await writeFile(join(workspace, "sessions", f), "");
    }
    await writeConfig({
      agents: { defaults: { workspace, model: "deepseek-chat", provider: "deepseek" } },
      providers: { deepseek: { apiKey: "sk-deepseek-secret-000111" }, openai: { apiKey: "" } },
      channels: { telegram: { enabled: true }, discord: { enabled: true } },
    });
    const run = await cli(["status", "--json"]);
    expect(run.code).toBe(0);
    expect(run.stdout).not.toContain("sk-deepseek-secret-000111");
    expect(JSON.parse(run.stdout)).toEqual({
      config: { path: configPath, exists: true },
      workspace: { path: workspace, exists: true },
      model: "deepseek-chat",
      provider: "deepseek",
      // Issue 13: where replies come from and which rule chose it.
      llm: {
        provider: "deepseek",
        baseURL: "https://api.deepseek.com/v1",
        model: "deepseek-chat",
        rule: "explicit",
        reason: 'agents.defaults.provider is "deepseek"',
        warnings: [],
      },
      providers: { deepseek: { apiKeySet: true }, openai: { apiKeySet: false } },
      channels: ["telegram", "discord"],
      // Issue 12: enabled without their tokens, these used to be reported as if they would run.
      problems: [
        expect.stringMatching(/^channels\.telegram\.token is empty/) as unknown,
        expect.stringMatching(/^channels\.discord\.token is empty/) as unknown,
      ],
      sessions: 2,
      // Issue 18: people let in by pairing code, and codes waiting.
      pairing: { approved: 0, pending: 0 },
      // Sandboxed or not depends on this machine's bwrap (exec-status.test.ts checks both).
      exec: { sandboxed: expect.any(Boolean) as unknown, detail: expect.any(String) as unknown },
      agents: { names: [], problems: [] },
      gateway: { running: false },
      held: {},
      memory: { unavailable: "no index yet (built when the gateway starts)" },
    });
  });

  it("prints a readable summary and exits 78 on a bad config", async () => {
    const plain = await cli(["status"]);
    expect(plain.code).toBe(0);
    expect(plain.stdout).toContain(`config     ${configPath} (missing: run \`palaver onboard\`)`);
    expect(plain.stdout).toContain("provider   auto → none: No LLM provider is configured.");
    // Nothing else enabled: the web chat is, by default.
    expect(plain.stdout).toContain("channels   web");
    expect(plain.stdout).toContain("sessions   0");
    expect(plain.stdout).not.toContain("problem");

    await writeConfig({ channels: { telegram: { enabled: "yes" } } });
    const bad = await cli(["status", "--json"]);
    expect(bad.code).toBe(EXIT_CONFIG);
    expect(bad.stderr).toContain('channels.telegram.enabled: expected true or false, got "yes"');
  });
});

describe("palaver config check agrees with palaver gateway (issue 35)", () => {
  /** The refusal as printed: the "palaver:" line and the indented problem lines under it. */
  function refusal(stderr: string): string {
    const lines = stderr.split("\n");
    const start = lines.findIndex((l) => l.startsWith("palaver: "));
    if (start < 0) return "";
    const rest = lines.slice(start + 1);
    const end = rest.findIndex((l) => !l.startsWith("  "));
    return [lines[start], ...rest.slice(0, end < 0 ? rest.length : end)].join("\n");
  }

  /** Both commands through the real CLI (src/main.ts), with the same home, config and .env. */
  async function both(): Promise<{ check: Run; gateway: Run }> {
    const env: NodeJS.ProcessEnv = {};
    for (const [k, v] of Object.entries(process.env)) if (!k.startsWith("PALAVER_")) env[k] = v;
    Object.assign(env, { HOME: home, PALAVER_CONFIG: configPath, NO_COLOR: "1" });
    const check = await runCli(["config", "check"], { cwd: dir, env });
    // Port 0: should it start after all (the bug), it takes no port another test uses, and ends at the time limit.
    const gateway = await runCli(["gateway"], {
      cwd: dir,
      env: { ...env, PALAVER_GATEWAY__PORT: "0" },
      timeoutMs: 30_000,
    });
    return { check, gateway };
  }

  const cases: { name: string; config: unknown; dotenv?: string; says: string }[] = [
    {
      name: "a misspelt provider",
      config: { agents: { defaults: { provider: "olama", model: "llama3.1" } }, providers: { ollama: {} } },
      says: 'did you mean "ollama"?',
    },
    {
      name: "openai chosen without a key",
      config: { agents: { defaults: { provider: "openai" } }, providers: { openai: {} } },
      says: "providers.openai.apiKey is empty",
    },
    {
      name: "custom without apiBase",
      config: { agents: { defaults: { provider: "custom" } }, providers: { custom: { apiKey: "k-1" } } },
      says: "set providers.custom.apiBase",
    },
    {
      name: "an apiBase without a scheme",
      config: { providers: { custom: { apiBase: "localhost:11434/v1" } } },
      says: 'providers.custom.apiBase: "localhost:11434/v1" has no scheme: write "http://localhost:11434/v1"',
    },
    {
      name: "the README's placeholder key",
      config: {},
      dotenv: "PALAVER_PROVIDERS__OPENAI__API_KEY=sk-...\n",
      says: 'providers.openai.apiKey: "sk-..." is a placeholder: replace it with your API key (from PALAVER_PROVIDERS__OPENAI__API_KEY',
    },
    { name: "no provider at all", config: {}, says: "No LLM provider is configured" },
  ];

  for (const c of cases) {
    it(`${c.name}: both exit 78 with the same words`, async () => {
      await writeConfig(c.config);
      if (c.dotenv) await writeFile(join(dirname(configPath), ".env"), c.dotenv);
      const { check, gateway } = await both();
      expect(check.code, check.stdout + check.stderr).toBe(EXIT_CONFIG);
      expect(gateway.code, gateway.stderr).toBe(EXIT_CONFIG);
      expect(refusal(check.stderr)).toContain(c.says);
      expect(refusal(check.stderr)).toBe(refusal(gateway.stderr));
      expect(check.stdout).toBe("");
    });
  }
});

describe("palaver config check: mistakes a person makes by hand (issue 35)", () => {
  const key = { PALAVER_PROVIDERS__OPENAI__API_KEY: "sk-test-real-2" };

  it("suggests the known key an unknown one is a typo of", async () => {
    await writeConfig({ agents: { defaults: { maxToken: 4096, max_tokenz: 1 } } });
    const run = await cli(["config", "check"], key);
    expect(run.code).toBe(0);
    expect(run.stdout).toContain(
      "  - unknown key agents.defaults.maxToken (ignored; did you mean maxTokens?)\n",
    );
    expect(run.stdout).toContain(
      "  - unknown key agents.defaults.max_tokenz (ignored; did you mean maxTokens?)\n",
    );
  });

  it("says JSON has no comments, at the comment's line", async () => {
    await writeConfig('{\n  "agents": {\n    // my model\n    "defaults": { "model": "x" }\n  }\n}\n');
    const run = await cli(["config", "check"], key);
    expect(run.code).toBe(EXIT_CONFIG);
    expect(run.stderr).toContain("JSON has no comments: remove the comment at line 3");

    await writeConfig('{ "agents": {} /* defaults */ }\n');
    const block = await cli(["config", "check"], key);
    expect(block.code).toBe(EXIT_CONFIG);
    expect(block.stderr).toContain("JSON has no comments: remove the comment at line 1");
  });
});

describe("palaver onboard fits the README (issue 35)", () => {
  it("after the README's local-model config: exits 0, adds the workspace, leaves the config byte for byte", async () => {
    const readme =
      '{ "agents": { "defaults": { "provider": "ollama", "model": "llama3.1" } }, "providers": { "ollama": {} } }\n';
    await writeConfig(readme);
    const run = await cli(["onboard"]);
    expect(run.stderr).toBe("");
    expect(run.code).toBe(0);
    expect(await readFile(configPath, "utf8")).toBe(readme);
    expect(existsSync(join(home, ".palaver", "workspace", "AGENTS.md"))).toBe(true);
    expect(run.stdout).toContain(`Kept your config ${configPath}`);
  });

  it("on a fresh home writes a config to edit that config check accepts once a key is given", async () => {
    const run = await cli(["onboard"]);
    expect(run.code).toBe(0);
    const written = JSON.parse(await readFile(configPath, "utf8")) as {
      agents: { defaults: { provider: string; model: string } };
      channels: { telegram: { enabled: boolean } };
    };
    expect(written.agents.defaults.provider).toBe("auto");
    expect(written.agents.defaults.model).not.toBe("");
    expect(written.channels.telegram.enabled).toBe(false);
    for (const step of ["npm start", "web chat", "palaver chat", "palaver config check"]) {
      expect(run.stdout).toContain(step);
    }

    const keyless = await cli(["config", "check"]);
    expect(keyless.code).toBe(EXIT_CONFIG);
    await writeFile(join(dirname(configPath), ".env"), "PALAVER_PROVIDERS__OPENAI__API_KEY=sk-test-real-3\n");
    const keyed = await cli(["config", "check"]);
    expect(keyed.stderr).toBe("");
    expect(keyed.code).toBe(0);
  });
});
