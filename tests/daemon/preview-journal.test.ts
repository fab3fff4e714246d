/**
 * The journal's record of live previews on screen (issue 15 item 4): recorded while shown, closed
 * when finished, stopped or closed, only open ones kept by compaction, bad lines skipped. And the
 * hooks that feed it: LivePreview says when it posted and when it ended.
 */
import { copyFileSync } from "node:fs";
import { readFile, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { INTERRUPTED_NOTE, interruptPreview } from "../../src/channels/interrupted-previews.js";
import { LivePreview } from "../../src/channels/live-preview.js";
import { ChannelManager } from "../../src/channels/manager.js";
import type { PreviewSurface, PreviewTarget } from "../../src/channels/types.js";
import { MessageBus } from "../../src/bus/bus.js";
import type { OutboundMessage } from "../../src/bus/types.js";
import { TestChannel } from "../helpers/test-channel.js";
import { Journal, type JournalOptions, type OpenPreview } from "../../src/daemon/journal.js";
import { captureLog } from "../helpers/log.js";
import { waitFor } from "../helpers/wait.js";

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), "palaver-preview-journal-"));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

const preview = (id: string, refs = ["101"]): OpenPreview => ({
  id,
  turnId: `turn-${id}`,
  channel: "telegram",
  chatId: "-100",
  threadId: "4",
  metadata: { chatType: "supergroup" },
  refs,
});

/** The previews a restart would find, read from a copy so the live journal's file is left alone. */
function afterRestart(path: string, opts: JournalOptions = {}): OpenPreview[] {
  const copy = `${path}.crash-copy`;
  copyFileSync(path, copy);
  const journal = new Journal(copy, opts);
  journal.open();
  const open = journal.openPreviews();
  journal.close();
  return open;
}

/** A surface that remembers what it was asked; edits of `gone` refs fail. */
function fakeSurface(gone: string[] = []) {
  const calls: { op: "post" | "edit"; ref: string; text: string }[] = [];
  let next = 1;
  const surface: PreviewSurface = {
    maxChars: 40,
    post: (text) => {
      const ref = String(next++);
      calls.push({ op: "post", ref, text });
      return Promise.resolve(ref);
    },
    edit: (ref, text) => {
      if (gone.includes(ref)) return Promise.reject(new Error("message to edit not found"));
      calls.push({ op: "edit", ref, text });
      return Promise.resolve();
    },
    finalParts: (content) => [content],
  };
  return { surface, calls };
}

describe("Journal: open previews", () => {
  it("records a preview and its continuations, and forgets it once closed", () => {
    const path = join(dir, "j.jsonl");
    const journal = new Journal(path);
    journal.open();
    journal.recordPreview(preview("a"));
    journal.recordPreview(preview("a", ["101", "102"]));
    journal.recordPreview(preview("b"));
    journal.closePreview("b");
    journal.closePreview("unknown"); // nothing recorded: nothing written
    expect(afterRestart(path)).toEqual([preview("a", ["101", "102"])]);
    journal.closePreview("a");
    expect(afterRestart(path)).toEqual([]);
    journal.close();
  });

  it("keeps no preview text, only where it is", async () => {
    const path = join(dir, "j.jsonl");
    const journal = new Journal(path);
    journal.open();
    const { surface } = fakeSurface();
    const live = new LivePreview(surface, {
      intervalMs: 0,
      onPosted: (refs) => journal.recordPreview({ ...preview("p"), refs: [...refs] }),
    });
    live.update("a secret half answer");
    await waitFor(() => live.visible, 5000, "the preview");
    await live.close();
    journal.close();
    const text = await readFile(path, "utf8");
    expect(text).toContain('"t":"preview"');
    expect(text).not.toContain("secret");
  });

  it("compaction keeps only the open previews, and the restart still finds them", async () => {
    const path = join(dir, "j.jsonl");
    const journal = new Journal(path, { compactEvery: 3 });
    journal.open();
    journal.recordPreview(preview("open"));
    for (let i = 0; i < 3; i++) {
      journal.recordPreview(preview(`closed${i}`));
      journal.closePreview(`closed${i}`);
    }
    journal.close();
    const lines = (await readFile(path, "utf8")).trim().split("\n");
    expect(lines.map((l) => (JSON.parse(l) as { id?: string }).id)).toEqual(["open"]);
    expect(afterRestart(path)).toEqual([preview("open")]);
  });

  it("remembers a bounded number of previews, the newest", () => {
    const path = join(dir, "j.jsonl");
    const journal = new Journal(path, { maxPreviews: 2 });
    journal.open();
    for (const id of ["a", "b", "c"]) journal.recordPreview(preview(id));
    expect(journal.openPreviews().map((p) => p.id)).toEqual(["b", "c"]);
    journal.close();
    expect(new Set(afterRestart(path, { maxPreviews: 2 }).map((p) => p.id))).toEqual(new Set(["b", "c"]));
  });

  it("skips a corrupt preview line and keeps the rest", async () => {
    const path = join(dir, "j.jsonl");
    const bad = [
      '{"t":"preview","id":"x","turnId":"t","channel":"telegram","chatId":"1","refs":[]}',
      '{"t":"preview","id":"y","channel":"telegram"}',
      '{"t":"previewClosed"}',
      '{"t":"preview","id":"torn","tur',
    ];
    await writeFile(path, [JSON.stringify({ t: "preview", ...preview("good") }), ...bad].join("\n") + "\n");
    const { log } = captureLog();
    const journal = new Journal(path, { log });
    journal.open();
    expect(journal.openPreviews()).toEqual([preview("good")]);
    journal.close();
    expect(await readFile(`${path}.corrupt`, "utf8")).toContain('"id":"y"');
  });
});

describe("LivePreview hooks", () => {
  it("says each post with all refs so far, and ends once whether finished, stopped or closed", async () => {
    for (const how of ["finish", "stop", "close"] as const) {
      const { surface } = fakeSurface();
      const posted: string[][] = [];
      let ended = 0;
      const live = new LivePreview(surface, {
        intervalMs: 0,
        onPosted: (refs) => posted.push([...refs]),
        onEnded: () => ended++,
      });
      // 40 characters a message: this one takes two.
      live.update(`${"a".repeat(30)} ${"b".repeat(30)}`);
      await waitFor(() => posted.length === 2, 5000, "both messages");
      if (how === "finish") await live.finish("the final");
      else if (how === "stop") await live.stop();
      else await live.close();
      await live.close();
      expect(posted).toEqual([["1"], ["1", "2"]]);
      expect(ended).toBe(1);
    }
  });
});

describe("interruptPreview", () => {
  it("rewrites the last message to the note and earlier parts to an ellipsis", async () => {
    const { surface, calls } = fakeSurface();
    await interruptPreview(surface, ["5", "6"]);
    expect(calls).toEqual([
      { op: "edit", ref: "6", text: INTERRUPTED_NOTE },
      { op: "edit", ref: "5", text: "…" },
    ]);
  });

  it("leaves Telegram drafts alone (they vanish on their own) and throws what the platform throws", async () => {
    const { surface, calls } = fakeSurface(["9"]);
    await interruptPreview(surface, ["d:3"]);
    expect(calls).toEqual([]);
    await expect(interruptPreview(surface, ["9"])).rejects.toThrow(/not found/);
  });
});

/** A chat that shows previews in memory; edits of refs in `gone` fail (a deleted message). */
class PreviewChannel extends TestChannel {
  readonly screen: string[] = [];
  readonly targets: PreviewTarget[] = [];
  readonly gone = new Set<string>();

  previewSurface(target: PreviewTarget): PreviewSurface {
    this.targets.push(target);
    return {
      maxChars: 1000,
      post: (text) => Promise.resolve(String(this.screen.push(text) - 1)),
      edit: (ref, text) => {
        if (this.gone.has(ref)) return Promise.reject(new Error("message to edit not found"));
        this.screen[Number(ref)] = text;
        return Promise.resolve();
      },
      finalParts: (content) => [content],
    };
  }
}

describe("ChannelManager: previews in the journal", () => {
  const managers: ChannelManager[] = [];
  afterEach(async () => {
    for (const m of managers.splice(0)) await m.stop(1000);
  });

  async function start(journal: Journal, channels: PreviewChannel[]) {
    const bus = new MessageBus();
    const { log, lines } = captureLog();
    const manager = new ChannelManager({
      bus,
      sendProgress: false,
      sendToolHints: false,
      streaming: true,
      streamIntervalMs: 0,
      journal,
      retryBaseMs: 10,
      retryMaxMs: 10,
      log,
    });
    managers.push(manager);
    for (const channel of channels) manager.add(channel, { allowFrom: ["*"] });
    await manager.start();
    return { bus, manager, lines };
  }

  const msg = (kind: OutboundMessage["kind"], content: string): OutboundMessage => ({
    channel: "chat",
    chatId: "c1",
    kind,
    content,
    turnId: "t1",
    threadId: "3",
  });

  it("journals a streamed preview while it is on screen and closes it with the final", async () => {
    const journal = new Journal(join(dir, "j.jsonl"));
    journal.open();
    const channel = new PreviewChannel("chat");
    const { bus } = await start(journal, [channel]);
    bus.publishOutbound(msg("delta", "half an ans"));
    await waitFor(() => journal.openPreviews().length === 1, 5000, "the preview journaled");
    expect(journal.openPreviews()[0]).toMatchObject({
      turnId: "t1",
      channel: "chat",
      chatId: "c1",
      threadId: "3",
      refs: ["0"],
    });
    bus.publishOutbound(msg("final", "the whole answer"));
    await waitFor(() => journal.openPreviews().length === 0, 5000, "the preview closed");
    expect(channel.screen).toEqual(["the whole answer"]);
    journal.close();
  });

  it("marks previews a crash left open as interrupted, once, failures and unknown channels closed anyway", async () => {
    const journal = new Journal(join(dir, "j.jsonl"));
    journal.open();
    const channel = new PreviewChannel("chat");
    channel.screen.push("half an ans", "gone one");
    channel.gone.add("1");
    // Starts on its second attempt: its previews wait for it.
    const late = new PreviewChannel("late", { failStarts: 1 });
    late.screen.push("late half");
    const left = [
      { ...preview("a", ["0"]), channel: "chat", chatId: "c1" },
      { ...preview("b", ["1"]), channel: "chat", chatId: "c1" },
      { ...preview("c", ["0"]), channel: "elsewhere" },
      { ...preview("d", ["0"]), channel: "late" },
    ];
    for (const p of left) journal.recordPreview(p);
    const { manager, lines } = await start(journal, [channel, late]);
    manager.interruptPreviews(journal.openPreviews());
    await waitFor(() => journal.openPreviews().length === 0, 5000, "every leftover closed");
    expect(channel.screen).toEqual([INTERRUPTED_NOTE, "gone one"]);
    expect(late.screen).toEqual([INTERRUPTED_NOTE]);
    expect(channel.targets[0]).toEqual({
      chatId: "c1",
      turnId: "turn-a",
      threadId: "4",
      metadata: { chatType: "supergroup" },
    });
    expect(lines.some((l) => l.msg === "could not mark an interrupted preview")).toBe(true);
    journal.close();
  });
});
