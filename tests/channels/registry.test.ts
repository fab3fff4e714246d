import { execFile } from "node:child_process";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import {
  createEnabledChannels,
  PLATFORM_LIST,
  PLATFORM_NAMES,
  PLATFORMS,
  platformProblems,
  type ChannelFactory,
} from "../../src/channels/registry.js";
import { ChannelsSchema, ConfigSchema, defaultConfig } from "../../src/config/schema.js";
import { ROOT, TSX } from "../helpers/cli.js";
import { TestChannel } from "../helpers/test-channel.js";
import { captureLog } from "../helpers/log.js";

describe("createEnabledChannels", () => {
  it("loads only enabled platforms, reports a missing adapter and survives a failing factory", async () => {
    const config = ConfigSchema.parse({
      channels: {
        telegram: { enabled: true, allowFrom: ["1"] },
        slack: { enabled: false },
        discord: { enabled: true, allowFrom: [] },
      },
    });
    const loaded: string[] = [];
    const factory =
      (name: string, fail = false): ChannelFactory =>
      async () => {
        loaded.push(name);
        if (fail) throw new Error("SDK failed to load");
        return new TestChannel(name);
      };
    const { log, lines } = captureLog();

    const channels = await createEnabledChannels(
      { config, workspace: "/tmp", log },
      { telegram: factory("telegram"), slack: factory("slack"), discord: factory("discord", true) },
    );

    expect(loaded).toEqual(["telegram", "discord"]); // slack is disabled: never loaded
    expect(channels.map((c) => [c.channel.name, c.options.allowFrom])).toEqual([["telegram", ["1"]]]);
    expect(lines.map((l) => l.msg)).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/channels\.discord\.allowFrom is empty/),
        expect.stringMatching(/channel discord could not be created/),
      ]),
    );

    const { log: log2, lines: lines2 } = captureLog();
    const none = await createEnabledChannels(
      { config, workspace: "/tmp", log: log2 },
      { telegram: undefined },
    );
    expect(none).toEqual([]);
    expect(lines2[0]!.msg).toMatch(/no telegram adapter/);
  });
});

describe("the platform list", () => {
  it("is what the config schema, the factory table and the checks are derived from", () => {
    // The schema knows exactly the listed platforms, each with the descriptor's own section schema.
    const shared = ["sendProgress", "sendToolHints", "streaming", "maxMediaBytes"];
    expect(Object.keys(ChannelsSchema.shape)).toEqual([...shared, ...PLATFORM_NAMES]);
    expect(PLATFORM_NAMES).toEqual(["telegram", "slack", "discord", "web"]);
    for (const platform of PLATFORM_LIST) {
      const section = ChannelsSchema.shape[platform.name];
      expect(section._zod.def.innerType).toBe(platform.configSchema);
      expect(PLATFORMS[platform.name]).toBe(platform);
    }
    // Every section defaults to disabled but the web chat's, which is on while nothing else is
    // (it needs no token), so a default config has nothing to report.
    expect(PLATFORM_NAMES.map((name) => defaultConfig().channels[name].enabled)).toEqual([
      false,
      false,
      false,
      true,
    ]);
    expect(platformProblems(defaultConfig())).toEqual([]);
  });

  it("reports only enabled sections' problems, in list order", () => {
    const config = ConfigSchema.parse({
      channels: {
        discord: { enabled: true },
        telegram: { enabled: true, token: "1:a" },
        slack: { enabled: false, botToken: "nonsense" },
      },
    });
    expect(platformProblems(config)).toEqual([expect.stringMatching(/^channels\.discord\.token is empty/)]);

    // Slack: what each mode needs; a rotating bot token (xoxe.xoxb-) is still a bot token.
    const slack = (section: Record<string, unknown>) =>
      platformProblems(ConfigSchema.parse({ channels: { slack: { enabled: true, ...section } } }));
    expect(slack({ botToken: "xoxe.xoxb-1-abc", appToken: "xapp-1" })).toEqual([]);
    expect(slack({ mode: "http", botToken: "xoxb-1", signingSecret: "s" })).toEqual([]);
    expect(slack({ botToken: "xoxp-1", appToken: "xapp-1" })).toEqual([
      expect.stringMatching(/^channels\.slack\.botToken must be the Bot User OAuth Token/),
    ]);
  });
});

describe("createEnabledChannels with the real platforms' checks", () => {
  it("does not create a platform with problems, logs each problem and says it is not started", async () => {
    const config = ConfigSchema.parse({
      channels: {
        telegram: { enabled: true, allowFrom: ["1"], mode: "webhook" },
        slack: { enabled: true, allowFrom: ["U1"], botToken: "xoxb-1", appToken: "xapp-1" },
      },
    });
    const created: string[] = [];
    // The descriptors' checks, with a recording create in place of the SDK adapters.
    const table = Object.fromEntries(
      PLATFORM_LIST.map((p) => [
        p.name,
        {
          problems: (section: unknown) => PLATFORMS[p.name].problems(section),
          create: async () => {
            created.push(p.name);
            return new TestChannel(p.name);
          },
        },
      ]),
    );
    const { log, lines } = captureLog();

    const channels = await createEnabledChannels({ config, workspace: "/tmp", log }, table);

    expect(created).toEqual(["slack"]);
    expect(channels.map((c) => c.channel.name)).toEqual(["slack"]);
    const errors = lines.filter((l) => l.level === 50).map((l) => [l.channel, l.msg]);
    expect(errors).toEqual([
      ["telegram", expect.stringMatching(/^channels\.telegram\.token is empty/)],
      ["telegram", expect.stringMatching(/^channels\.telegram\.webhook\.url is empty/)],
      ["telegram", expect.stringMatching(/^channel telegram is not started: fix channels\.telegram/)],
    ]);
  });
});

/**
 * Runs `code` (an ES module body) in a fresh Node whose module resolution
 * throws on any chat SDK: what it imports is then known not to load one.
 */
async function runWithoutSdks(code: string): Promise<{ ok: boolean; output: string }> {
  const hooks = `export async function resolve(specifier, context, next) {
    if (/^(grammy|@grammyjs\\/|@slack\\/|discord\\.js|@discordjs\\/)/.test(specifier)) {
      throw new Error("SDK loaded: " + specifier);
    }
    return next(specifier, context);
  }`;
  const register = `import { register } from "node:module";
    register(${JSON.stringify(`data:text/javascript,${encodeURIComponent(hooks)}`)});`;
  const args = [
    ...["--import", `data:text/javascript,${encodeURIComponent(register)}`, "--import", TSX],
    ...["--input-type=module", "-e", code],
  ];
  try {
    const { stdout, stderr } = await promisify(execFile)(process.execPath, args, {
      cwd: ROOT,
      timeout: 60_000,
    });
    return { ok: true, output: stdout + stderr };
  } catch (err) {
    const e = err as { stdout?: string; stderr?: string };
    return { ok: false, output: `${e.stdout ?? ""}${e.stderr ?? ""}` };
  }
}

const moduleUrl = (path: string) => JSON.stringify(pathToFileURL(join(ROOT, path)).href);

describe("the platform list's import cost", () => {
  it("loads no SDK for the schema, config check, status, or a platform refused for its problems", async () => {
    const run = await runWithoutSdks(`
      await import(${moduleUrl("src/cli/config.ts")});
      await import(${moduleUrl("src/cli/status.ts")});
      const { createEnabledChannels } = await import(${moduleUrl("src/channels/registry.ts")});
      const { ConfigSchema } = await import(${moduleUrl("src/config/schema.ts")});
      const { pino } = await import("pino");
      const enabled = { enabled: true, allowFrom: ["*"] };
      const config = ConfigSchema.parse({ channels: { telegram: enabled, slack: enabled, discord: enabled } });
      const channels = await createEnabledChannels({ config, workspace: ".", log: pino({ level: "silent" }) });
      console.log("created", channels.length);
    `);
    expect(run.output).toContain("created 0");
    expect(run.ok).toBe(true);

    // The check itself works: an adapter does load its SDK.
    const control = await runWithoutSdks(`await import(${moduleUrl("src/channels/telegram/adapter.ts")});`);
    expect(control.ok).toBe(false);
    expect(control.output).toMatch(/SDK loaded: (grammy|@grammyjs)/);
  });
});
