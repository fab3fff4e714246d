/**
 * The message tool as a way out of the machine (issue 11): it must not attach
 * palaver's own secrets, must follow restrictToWorkspace like the file tools,
 * and must not write to chats that never talked to the bot.
 */
import { mkdir, symlink, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { createMessageTool } from "../../../src/agent/tools/message.js";
import { SessionStore } from "../../../src/sessions/store.js";
import { ToolError } from "../../../src/util/errors.js";
import { TempDirs, makeContext } from "./helpers.js";

describe("message tool trust boundary", () => {
  const temps = new TempDirs();
  let state: string;
  let workspace: string;
  let configPath: string;
  let sessions: SessionStore;

  beforeEach(async () => {
    // The default layout: the workspace inside the state folder, beside config.json and .env.
    state = await temps.make("palaver-state-");
    workspace = join(state, "workspace");
    configPath = join(state, "config.json");
    await mkdir(workspace);
    await mkdir(join(state, "journal"));
    await writeFile(configPath, '{"channels":{"telegram":{"token":"123:SECRET"}}}');
    await writeFile(join(state, ".env"), "OPENAI_API_KEY=sk-secret");
    await writeFile(join(state, "journal", "messages.jsonl"), "{}\n");
    await writeFile(join(workspace, "report.txt"), "fine to send");
    sessions = new SessionStore(join(workspace, "sessions"));
  });
  afterEach(() => temps.cleanup());

  function tool(restrictToWorkspace: boolean, lists: Record<string, string[]> = {}) {
    return createMessageTool({
      restrictToWorkspace,
      secrets: { stateDir: state, configPath },
      targets: {
        hasSession: (channel, chatId) => sessions.hasChat(channel, chatId),
        allowFrom: (channel) => lists[channel],
      },
    });
  }

  it.each([true, false])(
    "never attaches the config file, .env or the state folder (restrictToWorkspace %s)",
    async (restrict) => {
      const { ctx, published } = makeContext({ workspace, channel: "telegram", chatId: "42" });
      await writeFile(join(workspace, ".env"), "BRAVE_API_KEY=secret");
      for (const media of [
        configPath,
        "../config.json",
        join(state, ".env"),
        ".env",
        "../journal/messages.jsonl",
      ]) {
        const err = await tool(restrict)
          .execute({ content: "here", media: [media] }, ctx)
          .catch((e: unknown) => e);
        expect(err, media).toBeInstanceOf(ToolError);
        expect(String(err), media).toMatch(/access denied/);
      }
      expect(published).toEqual([]);
    },
  );

  it("catches a symlink in the workspace that points at the config", async () => {
    await symlink(configPath, join(workspace, "innocent.json"));
    const { ctx, published } = makeContext({ workspace, channel: "telegram", chatId: "42" });
    await expect(tool(false).execute({ content: "x", media: ["innocent.json"] }, ctx)).rejects.toThrow(
      /palaver's own files/,
    );
    expect(published).toEqual([]);
  });

  it("follows restrictToWorkspace like the file tools", async () => {
    const outside = await temps.make("palaver-outside-");
    await writeFile(join(outside, "notes.txt"), "private");
    const { ctx, published } = makeContext({ workspace, channel: "telegram", chatId: "42" });
    await expect(
      tool(true).execute({ content: "x", media: [join(outside, "notes.txt")] }, ctx),
    ).rejects.toThrow(/outside the workspace.*tools\.restrictToWorkspace/);
    expect(published).toEqual([]);
    // Off, the operator chose to let the tools out: files outside the workspace go (secrets still do not).
    await tool(false).execute({ content: "x", media: [join(outside, "notes.txt")] }, ctx);
    await tool(true).execute({ content: "x", media: ["report.txt"] }, ctx);
    expect(published.map((m) => m.media)).toEqual([
      [join(outside, "notes.txt")],
      [join(workspace, "report.txt")],
    ]);
  });

  it("refuses chats that never talked to the bot, with the reason", async () => {
    const { ctx, published } = makeContext({ workspace, channel: "telegram", chatId: "42" });
    const err = await tool(true, { telegram: ["*"] })
      .execute({ content: "hello stranger", chat_id: "999" }, ctx)
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ToolError);
    expect(String(err)).toMatch(
      /cannot send to telegram:999.*talked to palaver before.*channels\.telegram\.allowFrom/,
    );
    await expect(
      tool(true, { telegram: ["42"] }).execute({ content: "x", channel: "nosuch", chat_id: "1" }, ctx),
    ).rejects.toThrow(/no channel named "nosuch"/);
    expect(published).toEqual([]);
  });

  it("writes to chats with a session (threads included) and to users named in allowFrom", async () => {
    await sessions.append(await sessions.get("slack:C7"), [{ role: "user", content: "hi" }]);
    await sessions.append(await sessions.get("telegram:-100:5"), [{ role: "user", content: "topic" }]);
    await sessions.flush();
    const { ctx, published } = makeContext({ workspace, channel: "telegram", chatId: "42" });
    const lists = { telegram: ["42", "77"], slack: [] };
    await tool(true, lists).execute({ content: "a", channel: "slack", chat_id: "C7" }, ctx);
    await tool(true, lists).execute({ content: "b", chat_id: "-100" }, ctx);
    await tool(true, lists).execute({ content: "c", chat_id: "77" }, ctx);
    expect(published.map((m) => `${m.channel}:${m.chatId}`)).toEqual([
      "slack:C7",
      "telegram:-100",
      "telegram:77",
    ]);
    await expect(
      tool(true, lists).execute({ content: "d", channel: "slack", chat_id: "C" }, ctx),
    ).rejects.toThrow(/cannot send to slack:C/);
  });

  it("always writes to the turn's own chat", async () => {
    const { ctx, published } = makeContext({ workspace, channel: "cli", chatId: "direct" });
    await tool(true).execute({ content: "hi" }, ctx);
    expect(published).toHaveLength(1);
  });
});
