/**
 * The streaming engine every platform uses (channels/live-preview.ts), over an in-memory surface
 * that keeps messages the way a chat shows them and can refuse calls like a platform does.
 * The platform adapters' own streaming is tested through their fakes.
 */
import { describe, expect, it } from "vitest";
import { LivePreview, STOPPED_MARK } from "../../src/channels/live-preview.js";
import type { PreviewSurface } from "../../src/channels/types.js";
import { ChannelError } from "../../src/util/errors.js";
import { waitFor } from "../helpers/wait.js";

class ChatSurface implements PreviewSurface {
  readonly messages: { text: string; formatted: boolean }[] = [];
  readonly calls: string[] = [];
  /** Errors the next calls throw, in order. */
  readonly failures: Error[] = [];
  constructor(readonly maxChars = 100) {}

  async post(text: string, formatted: boolean): Promise<string> {
    this.calls.push(`post ${text}`);
    const failure = this.failures.shift();
    if (failure) throw failure;
    this.messages.push({ text, formatted });
    return String(this.messages.length - 1);
  }

  async edit(ref: string, text: string, formatted: boolean): Promise<void> {
    this.calls.push(`edit ${ref} ${text}`);
    const failure = this.failures.shift();
    if (failure) throw failure;
    this.messages[Number(ref)] = { text, formatted };
  }

  finalParts(content: string): string[] {
    return [`<b>${content}</b>`];
  }

  get texts(): string[] {
    return this.messages.map((m) => m.text);
  }
}

const rateLimited = () => new ChannelError("429 Too Many Requests", { retryAfterMs: 20 });

describe("LivePreview", () => {
  it("shows the first text at once, coalesces what comes within the interval, and finalizes in place", async () => {
    const chat = new ChatSurface();
    const preview = new LivePreview(chat, { intervalMs: 60_000 });
    preview.update("Hel");
    await waitFor(() => chat.messages.length === 1, undefined, "the first preview");
    for (const t of ["Hello", "Hello, w", "Hello, world"]) preview.update(t);
    expect(await preview.finish("Hello, world!")).toBe(true);
    // One post, one final edit: the texts in between were coalesced away, not queued.
    expect(chat.calls).toEqual(["post Hel", "edit 0 <b>Hello, world!</b>"]);
    expect(chat.messages).toEqual([{ text: "<b>Hello, world!</b>", formatted: true }]);
  });

  it("leaves the final to a message of its own on a surface that does not finalize in place", async () => {
    const chat = Object.assign(new ChatSurface(), { finalInPlace: false });
    const preview = new LivePreview(chat, { intervalMs: 60_000 });
    preview.update("Hel");
    await waitFor(() => chat.messages.length === 1, undefined, "the first preview");
    expect(await preview.finish("Hello")).toBe(false); // the caller sends it
    expect(chat.calls).toEqual(["post Hel"]);
  });

  it("sends the newest text once the interval has passed", async () => {
    const chat = new ChatSurface();
    const preview = new LivePreview(chat, { intervalMs: 30 });
    preview.update("one");
    preview.update("one two");
    preview.update("one two three");
    await waitFor(() => chat.texts[0] === "one two three", undefined, "the newest text shown");
    expect(chat.calls).toEqual(["post one", "edit 0 one two three"]);
    expect(await preview.finish("one two three")).toBe(true);
    expect(chat.calls.at(-1)).toBe("edit 0 <b>one two three</b>");
  });

  it("continues in a new message past the length limit, freezing the full one", async () => {
    const chat = new ChatSurface(20);
    const preview = new LivePreview(chat, { intervalMs: 0 });
    const long = "alpha beta gamma delta epsilon zeta eta theta";
    for (let i = 5; i <= long.length; i += 5) preview.update(long.slice(0, i));
    preview.update(long);
    await waitFor(() => chat.texts.join(" ") === long, undefined, "the whole text on screen");
    expect(chat.messages.length).toBeGreaterThan(1);
    for (const text of chat.texts) expect(text.length).toBeLessThanOrEqual(20);
  });

  it("a rate limit waits and then sends only the newest text", async () => {
    const chat = new ChatSurface();
    const preview = new LivePreview(chat, { intervalMs: 0 });
    preview.update("a");
    await waitFor(() => chat.messages.length === 1, undefined, "posted");
    chat.failures.push(rateLimited());
    preview.update("a b"); // sent at once, and refused
    preview.update("a b c"); // both while that call is out: coalesced
    preview.update("a b c d");
    await waitFor(() => chat.texts[0] === "a b c d", undefined, "the newest text after the wait");
    expect(chat.calls).toEqual(["post a", "edit 0 a b", "edit 0 a b c d"]);
  });

  it("a preview that breaks gives the final back to the caller, which sends it anew", async () => {
    const chat = new ChatSurface();
    const preview = new LivePreview(chat, { intervalMs: 0 });
    preview.update("partial");
    await waitFor(() => chat.messages.length === 1, undefined, "posted");
    chat.failures.push(new ChannelError("message to edit not found", { permanent: true }));
    preview.update("partial and more");
    await waitFor(() => chat.calls.length === 2, undefined, "the failed edit");
    expect(await preview.finish("the final")).toBe(false);
    expect(chat.calls).toHaveLength(2); // nothing more tried
  });

  it("a failed final edit is the caller's to send; a rate-limited one is retried", async () => {
    const chat = new ChatSurface();
    const preview = new LivePreview(chat, { intervalMs: 0 });
    preview.update("draft");
    await waitFor(() => chat.messages.length === 1, undefined, "posted");
    chat.failures.push(rateLimited());
    expect(await preview.finish("done")).toBe(true);
    expect(chat.texts).toEqual(["<b>done</b>"]);

    const other = new ChatSurface();
    const second = new LivePreview(other, { intervalMs: 0 });
    second.update("draft");
    await waitFor(() => other.messages.length === 1, undefined, "posted");
    other.failures.push(new ChannelError("message can't be edited", { permanent: true }));
    expect(await second.finish("done")).toBe(false);
    expect(other.texts).toEqual(["draft"]);
  });

  it("a final that reads exactly like the preview still gets its call (a draft vanishes otherwise)", async () => {
    const chat = new ChatSurface();
    chat.finalParts = (content: string) => [content];
    const preview = new LivePreview(chat, { intervalMs: 0 });
    preview.update("plain answer");
    await waitFor(() => chat.messages.length === 1, undefined, "posted");
    expect(await preview.finish("plain answer")).toBe(true);
    expect(chat.calls).toEqual(["post plain answer", "edit 0 plain answer"]);
    expect(chat.messages).toEqual([{ text: "plain answer", formatted: true }]);
  });

  it("nothing shown yet: finish leaves the sending to the caller", async () => {
    const chat = new ChatSurface();
    const preview = new LivePreview(chat, { intervalMs: 60_000 });
    expect(await preview.finish("quick answer")).toBe(false);
    expect(chat.calls).toEqual([]);
  });

  it("stop leaves the text shown so far with a mark, and later text is not sent", async () => {
    const chat = new ChatSurface();
    const preview = new LivePreview(chat, { intervalMs: 60_000 });
    preview.update("Once upon");
    await waitFor(() => chat.messages.length === 1, undefined, "posted");
    preview.update("Once upon a time");
    await preview.stop();
    preview.update("Once upon a time there");
    expect(chat.texts).toEqual([`Once upon${STOPPED_MARK}`]);
    expect(chat.calls).toHaveLength(2);
  });
});
