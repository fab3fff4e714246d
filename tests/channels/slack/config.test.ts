import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pino } from "pino";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { createSlackChannel } from "../../../src/channels/slack/adapter.js";
import { SlackConfigSchema } from "../../../src/config/platforms/slack.js";
import { loadConfig } from "../../../src/config/load.js";
import { ConfigSchema } from "../../../src/config/schema.js";

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), "palaver-slack-config-"));
});
afterEach(async () => rm(dir, { recursive: true, force: true }));

describe("channels.slack config", () => {
  it("has palaver's defaults", () => {
    expect(SlackConfigSchema.parse({})).toEqual({
      enabled: false,
      allowFrom: [],
      dmPolicy: "pairing",
      admins: [],
      mode: "socket",
      botToken: "",
      appToken: "",
      signingSecret: "",
      port: 3000,
      path: "/slack/events",
      apiUrl: "",
      replyInThread: true,
      reactEmoji: "eyes",
      doneEmoji: "white_check_mark",
      groupPolicy: "mention",
      groupAllowFrom: [],
    });
  });

  it("loads nanobot's slack section (snake_case, webhook_path, user_token_read_only, dm) without warnings", async () => {
    const path = join(dir, "config.json");
    await writeFile(
      path,
      JSON.stringify({
        channels: {
          slack: {
            enabled: true,
            mode: "socket",
            webhook_path: "/nanobot/events",
            bot_token: "xoxb-1-abc",
            app_token: "xapp-1-abc",
            user_token_read_only: true,
            reply_in_thread: false,
            react_emoji: "eyes",
            done_emoji: "tada",
            allow_from: ["U1"],
            group_policy: "open",
            group_allow_from: ["C1"],
            dm: { enabled: false, policy: "allowlist", allow_from: ["U1"] },
          },
        },
      }),
    );
    const { config, warnings } = loadConfig({ configPath: path, env: {}, cwd: dir, loadDotenv: false });
    expect(warnings).toEqual([]);
    expect(config.channels.slack).toMatchObject({
      enabled: true,
      path: "/nanobot/events",
      botToken: "xoxb-1-abc",
      replyInThread: false,
      doneEmoji: "tada",
      groupPolicy: "open",
      groupAllowFrom: ["C1"],
      dm: { enabled: false, policy: "allowlist", allowFrom: ["U1"] },
    });
    expect(config.channels.slack).not.toHaveProperty("webhookPath");
  });

  it("prefers path over nanobot's webhookPath", () => {
    expect(SlackConfigSchema.parse({ path: "/a", webhookPath: "/b" }).path).toBe("/a");
  });

  it("can be set from the environment", async () => {
    const { config, warnings } = loadConfig({
      configPath: join(dir, "none.json"),
      env: {
        PALAVER_CHANNELS__SLACK__API_URL: "http://127.0.0.1:9/api/",
        PALAVER_CHANNELS__SLACK__DONE_EMOJI: "",
      },
      cwd: dir,
      loadDotenv: false,
    });
    expect(warnings).toEqual([expect.stringMatching(/does not exist; using defaults/)]);
    expect(config.channels.slack.apiUrl).toBe("http://127.0.0.1:9/api/");
    expect(config.channels.slack.doneEmoji).toBe("");
  });
});

describe("createSlackChannel: settings that cannot work, in plain words", () => {
  const create = (slack: Record<string, unknown>) =>
    createSlackChannel({
      config: ConfigSchema.parse({ channels: { slack: { enabled: true, ...slack } } }),
      workspace: dir,
      log: pino({ level: "silent" }),
    });

  it.each([
    [{ appToken: "xapp-1" }, /channels\.slack\.botToken is empty/],
    [{ botToken: "xoxb-1" }, /channels\.slack\.appToken is empty: Socket Mode needs an app-level token/],
    [{ botToken: "xoxb-1", appToken: "xoxb-2" }, /appToken must be an app-level token \(xapp-/],
    [{ botToken: "xoxb-1", mode: "http" }, /channels\.slack\.signingSecret is empty/],
  ])("%j", async (slack, message) => {
    await expect(create(slack)).rejects.toThrow(message);
  });

  it("creates the channel when the settings are complete", async () => {
    const channel = await create({ botToken: "xoxb-1", appToken: "xapp-1" });
    expect(channel.name).toBe("slack");
    const http = await create({ botToken: "xoxb-1", mode: "http", signingSecret: "s" });
    expect(http.name).toBe("slack");
  });
});
