/**
 * A live preview that a crash cut off mid-stream (the journal still had it open at start): its
 * messages would stay half-written forever, looking like an answer. They are rewritten once to a
 * short note; the answer itself comes again with the replayed message (or from the outbox). The
 * journal keeps where the preview is, never its text, so the note replaces the text shown.
 */
import type { Journal, OpenPreview } from "../daemon/journal.js";
import type { Logger } from "../log.js";
import { failureFields } from "./delivery.js";
import { HeldReplies } from "./held-replies.js";
import type { Channel, PreviewSurface } from "./types.js";

/** What an interrupted preview says from then on. */
export const INTERRUPTED_NOTE = "⚠️ This answer was interrupted (palaver restarted); it is sent again below.";

/** Refs of previews that vanish on their own (Telegram drafts, "d:<id>", telegram/preview.ts): nothing to edit. */
const VANISHING_REF = /^d:/;

/**
 * Rewrites the preview's last message to {@link INTERRUPTED_NOTE} and the earlier ones (parts frozen
 * at the length limit) to "…", as a finished preview leaves its leftovers. Throws what the platform
 * throws (a message deleted or too old); the caller gives up then: it is tried once.
 */
export async function interruptPreview(surface: PreviewSurface, refs: readonly string[]): Promise<void> {
  const last = refs.at(-1);
  if (last === undefined || VANISHING_REF.test(last)) return;
  await surface.edit(last, INTERRUPTED_NOTE, false);
  for (const ref of refs.slice(0, -1)) {
    if (!VANISHING_REF.test(ref)) await surface.edit(ref, "…", false);
  }
}

export interface InterruptedPreviewsDeps {
  journal?: Journal;
  log: Logger;
  /** Runs `work` in the chat's send order (the manager's per-chat queue). */
  inChatOrder(chat: { channel: string; chatId: string }, work: () => Promise<void>): void;
}

/**
 * The previews an earlier run left on screen, each marked once in its chat's order and closed in
 * the journal whatever happens (never retried forever). Those of a channel that is not running yet
 * wait until it runs, bounded like held replies; those of a channel that is not enabled are
 * forgotten: nothing could edit them.
 */
export class InterruptedPreviews {
  private readonly waiting = new HeldReplies<OpenPreview>();

  constructor(private readonly deps: InterruptedPreviewsDeps) {}

  /** `channelOf(name)`: the channel when it runs, "later" when it is enabled but not running yet. */
  mark(open: readonly OpenPreview[], channelOf: (name: string) => Channel | "later" | undefined): void {
    for (const preview of open) {
      const channel = channelOf(preview.channel);
      if (channel === "later") {
        const pushedOut = this.waiting.hold(preview.channel, preview);
        if (pushedOut) this.deps.journal?.closePreview(pushedOut.id);
      } else if (channel) {
        this.repair(channel, preview);
      } else {
        this.deps.log.info(
          { channel: preview.channel, chatId: preview.chatId },
          "a preview interrupted by a restart is left as it is: its channel is not enabled",
        );
        this.deps.journal?.closePreview(preview.id);
      }
    }
  }

  /** `channel` runs now: the previews waiting for it are marked. */
  started(channel: Channel): void {
    for (const preview of this.waiting.take(channel.name)) this.repair(channel, preview);
  }

  private repair(channel: Channel, preview: OpenPreview): void {
    this.deps.inChatOrder(preview, async () => {
      const target = {
        chatId: preview.chatId,
        turnId: preview.turnId,
        ...(preview.threadId !== undefined ? { threadId: preview.threadId } : {}),
        ...(preview.metadata ? { metadata: preview.metadata } : {}),
      };
      try {
        const surface = channel.previewSurface?.(target);
        if (surface) await interruptPreview(surface, preview.refs);
      } catch (err) {
        // Deleted, too old to edit, or the platform refuses: the note was a courtesy.
        this.deps.log.debug(
          { err, channel: preview.channel, chatId: preview.chatId, ...failureFields(err) },
          "could not mark an interrupted preview",
        );
      }
      this.deps.journal?.closePreview(preview.id);
    });
  }
}
