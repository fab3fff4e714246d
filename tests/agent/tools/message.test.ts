import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { createMessageTool, type MessageTargets } from "../../../src/agent/tools/message.js";
import { TempDirs, makeContext } from "./helpers.js";

/** Targets with these allowFrom lists and no sessions. */
function allowing(lists: Record<string, string[]>): MessageTargets {
  return { hasSession: () => Promise.resolve(false), allowFrom: (channel) => lists[channel] };
}

describe("message tool", () => {
  const temps = new TempDirs();
  afterEach(() => temps.cleanup());

  it("publishes to the turn's own chat with its metadata and marks the turn", async () => {
    const { ctx, published } = makeContext({
      channel: "slack",
      chatId: "C1",
      metadata: { thread_ts: "123.4" },
    });
    const out = await createMessageTool().execute({ content: "hi there" }, ctx);
    expect(out).toBe("Message sent to slack:C1");
    expect(published).toEqual([
      {
        channel: "slack",
        chatId: "C1",
        content: "hi there",
        kind: "final",
        metadata: { thread_ts: "123.4" },
      },
    ]);
    expect(ctx.turn.sentToOriginChat).toBe(true);
  });

  it("sends to another chat without touching the turn or leaking metadata", async () => {
    const { ctx, published } = makeContext({ channel: "slack", chatId: "C1", metadata: { thread_ts: "1" } });
    const out = await createMessageTool({
      restrictToWorkspace: true,
      targets: allowing({ telegram: ["42"] }),
    }).execute({ content: "ping", channel: "telegram", chat_id: "42" }, ctx);
    expect(out).toBe("Message sent to telegram:42");
    expect(published).toEqual([{ channel: "telegram", chatId: "42", content: "ping", kind: "final" }]);
    expect(ctx.turn.sentToOriginChat).toBe(false);
  });

  it("only a different chat_id on the same channel is another chat", async () => {
    const { ctx, published } = makeContext({ channel: "slack", chatId: "C1" });
    await createMessageTool({ restrictToWorkspace: true, targets: allowing({ slack: ["U2"] }) }).execute(
      { content: "x", chat_id: "U2" },
      ctx,
    );
    expect(published[0]).toMatchObject({ channel: "slack", chatId: "U2" });
    expect(ctx.turn.sentToOriginChat).toBe(false);
  });

  it("attaches media as absolute paths and refuses missing files", async () => {
    const ws = await temps.make();
    await writeFile(join(ws, "chart.png"), "png");
    const { ctx, published } = makeContext({ workspace: ws });
    const out = await createMessageTool().execute({ content: "see", media: ["chart.png"] }, ctx);
    expect(out).toBe("Message sent to cli:direct with 1 attachment");
    expect(published[0]!.media).toEqual([join(ws, "chart.png")]);
    await expect(createMessageTool().execute({ content: "x", media: ["nope.png"] }, ctx)).rejects.toThrow(
      /attachment not found: nope\.png/,
    );
    expect(published).toHaveLength(1);
  });

  it("refuses an empty message", async () => {
    const { ctx, published } = makeContext();
    await expect(createMessageTool().execute({ content: "  " }, ctx)).rejects.toThrow(/empty/);
    expect(published).toHaveLength(0);
    expect(ctx.turn.sentToOriginChat).toBe(false);
  });
});
