/**
 * The one inbound path of every platform: what happens to a message between
 * the platform's event and the bus.
 *
 * 1. The gate: `sink.allows` is asked once, before anything the sender could
 *    notice or that costs us (a download, a reaction, typing, the journal). A
 *    refused message goes to `sink.refuse` (the rate-limited refusal notice or
 *    a pairing code) and nowhere else.
 * 2. A message that can go on at once (no files, nothing queued before it in
 *    its conversation) is published at once. One the channel answers itself
 *    (Telegram's /start greeting) is answered in its conversation's order.
 * 3. Anything else is reserved (journaled) first, because the platform has
 *    been acknowledged and will not send it again; then, in arrival order per
 *    conversation: complete (an album being gathered), download, transcribe,
 *    publish — or cancel when it turned out not to be for the bot.
 */
import type { InboundMessage } from "../bus/types.js";
import type { ChatRef } from "../util/chat-folders.js";
import type { Logger } from "../log.js";
import { errorMessage, ChannelError } from "../util/errors.js";
import { KeyedQueue } from "../util/keyed-queue.js";
import { TaskSet } from "../util/task-set.js";
import { formatBytes, MediaTooLargeError } from "./media.js";
import type { Transcriber } from "./transcription.js";
import type { InboundReservation, InboundSink } from "./types.js";

/** A file offered with a message, not fetched yet. */
export interface IncomingFile {
  /** Voice notes and audio files are transcribed when `transcription` is configured. */
  kind: "voice" | "audio" | "image" | "video" | "file";
  /** What the user would call it: "photo", "voice message", "file". */
  label: string;
  name: string;
  /** When the platform says; a file known to be too large is not fetched at all. */
  sizeBytes?: number;
  /**
   * Fetches the file into the workspace (downloadFile, bounded by maxMediaBytes) and returns its
   * path. Throws MediaTooLargeError when it is too large; a ChannelError's message is shown to the
   * model as the reason (write it for the user); other errors are logged and reported generically.
   * `chat` is the message's chat: the file goes into that chat's media folder (mediaPath).
   */
  fetch(signal: AbortSignal, chat: ChatRef): Promise<string>;
}

/** What a file is, by the media type its platform gives (audio is transcribed). */
export function fileKindOf(contentType: string): Pick<IncomingFile, "kind" | "label"> {
  if (contentType.startsWith("audio/")) return { kind: "audio", label: "audio file" };
  if (contentType.startsWith("image/")) return { kind: "image", label: "image" };
  if (contentType.startsWith("video/")) return { kind: "video", label: "video" };
  return { kind: "file", label: "file" };
}

/** The part of a message known when it arrives, and what is still to come. */
export interface IncomingMessage {
  /** Messages with the same key are published in the order they arrived (a chat, a thread). */
  conversation: string;
  /** Sender and chat (for the gate) and the text. */
  inbound: InboundMessage;
  files: readonly IncomingFile[];
  /** Published before anything queued in its conversation (/stop). */
  urgent?: boolean;
  /**
   * For a message the channel answers itself instead of the agent (Telegram's /start greeting):
   * called, once the gate let the sender in, in the conversation's order; never published.
   */
  answer?: () => Promise<void>;
  /**
   * Work the message waits for before it is complete (gathering an album's parts); resolves to the
   * complete message, or null when it is not for the bot after all.
   */
  completes?: Promise<CompleteMessage | null>;
}

export interface CompleteMessage {
  inbound: InboundMessage;
  files: readonly IncomingFile[];
}

export interface InboundPathOptions {
  /** The channel's lifetime: when it aborts, reserved messages are left for the journal's replay. */
  signal: AbortSignal;
  maxMediaBytes: number;
  transcriber?: Transcriber | null;
  /** Tells the user something in the message's chat (the "too large" notice); best effort. */
  notify(msg: InboundMessage, text: string): Promise<void>;
  /** An allowed message was taken: the place for a receipt reaction. */
  onAccepted?(msg: InboundMessage): void;
  log: Logger;
}

/** The journal's text for a message whose files were still downloading when palaver stopped. */
export const INTERRUPTED_DOWNLOAD_NOTE =
  "[an attachment was being downloaded when palaver restarted; ask for it again]";

/** How a message is journaled before its files are fetched: a restart answers it with this note. */
export function reservedForm(msg: InboundMessage): InboundMessage {
  return withNotes(msg, [INTERRUPTED_DOWNLOAD_NOTE]);
}

export class InboundPath {
  private readonly queue = new KeyedQueue();
  private readonly tasks = new TaskSet();

  constructor(private readonly opts: InboundPathOptions) {}

  /**
   * Call it from the platform's event handler, before the platform is acknowledged. Returns whether
   * the sender was let in (false: the sink refused the message).
   */
  take(sink: InboundSink, msg: IncomingMessage): boolean {
    const { conversation, inbound } = msg;
    if (!sink.allows(inbound)) {
      this.refuse(sink, msg);
      return false;
    }
    if (msg.answer) {
      this.inOrder(conversation, msg.answer);
      return true;
    }
    const direct = !msg.completes && msg.files.length === 0 && !this.queue.busy(conversation);
    if (msg.urgent || direct) {
      this.opts.onAccepted?.(inbound);
      sink.publishInbound(inbound);
      return true;
    }
    const slow = msg.completes !== undefined || msg.files.length > 0;
    const reservation = sink.reserve?.(slow ? reservedForm(inbound) : inbound);
    if (!msg.completes) this.opts.onAccepted?.(inbound);
    this.inOrder(conversation, () => this.finish(sink, msg, reservation));
    return true;
  }

  /** Waits (bounded) for the messages still being completed; at stop. */
  settle(ms: number): Promise<boolean> {
    return this.tasks.settle(ms);
  }

  private refuse(sink: InboundSink, msg: IncomingMessage): void {
    // An album is refused once complete: it may turn out not to be for the bot at all.
    if (!msg.completes) sink.refuse(msg.inbound);
    else
      this.inOrder(msg.conversation, async () => {
        const done = await msg.completes!;
        if (done) sink.refuse(done.inbound);
      });
  }

  private inOrder(conversation: string, work: () => Promise<void>): void {
    void this.tasks.add(
      this.queue
        .run(conversation, work)
        .catch((err: unknown) => this.opts.log.error({ err }, "an incoming message could not be handed on")),
    );
  }

  private async finish(
    sink: InboundSink,
    msg: IncomingMessage,
    reservation: InboundReservation | undefined,
  ): Promise<void> {
    const done = msg.completes ? await msg.completes : msg;
    if (!done) {
      reservation?.cancel();
      return;
    }
    if (msg.completes) this.opts.onAccepted?.(done.inbound);
    const { signal } = this.opts;
    if (signal.aborted) return; // left reserved: the next start answers it
    const notes = await this.fetchAll(done, signal);
    if (signal.aborted) return;
    const complete = withNotes(done.inbound, notes.lines);
    const message = notes.media.length ? { ...complete, media: notes.media } : complete;
    if (reservation) reservation.publish(message);
    else sink.publishInbound(message);
  }

  private async fetchAll(
    done: CompleteMessage,
    signal: AbortSignal,
  ): Promise<{ media: string[]; lines: string[] }> {
    const results = await Promise.all(done.files.map((file) => this.fetchOne(file, done.inbound, signal)));
    const tooLarge = results.flatMap((r) => (r.tooLarge ? [r.tooLarge] : []));
    if (tooLarge.length > 0) {
      const limit = formatBytes(this.opts.maxMediaBytes);
      await this.opts
        .notify(
          done.inbound,
          `Sorry, I can't take files over ${limit}, so I didn't look at: ${tooLarge.join(", ")}.`,
        )
        .catch((err: unknown) => this.opts.log.warn({ err }, "could not tell the user a file was too large"));
    }
    return {
      media: results.flatMap((r) => (r.path ? [r.path] : [])),
      lines: results.flatMap((r) => (r.note ? [r.note] : [])),
    };
  }

  private async fetchOne(
    file: IncomingFile,
    inbound: InboundMessage,
    signal: AbortSignal,
  ): Promise<{ path?: string; note?: string; tooLarge?: string }> {
    const { label, name } = file;
    let path: string;
    try {
      const max = this.opts.maxMediaBytes;
      if (file.sizeBytes !== undefined && file.sizeBytes > max)
        throw new MediaTooLargeError(file.sizeBytes, max);
      path = await file.fetch(signal, { channel: inbound.channel, chatId: inbound.chatId });
    } catch (err) {
      if (err instanceof MediaTooLargeError) {
        const size = err.sizeBytes !== undefined ? ` (${formatBytes(err.sizeBytes)})` : "";
        return { note: `[${label} "${name}" not downloaded: ${err.message}]`, tooLarge: `${name}${size}` };
      }
      this.opts.log.warn({ err, file: name, chatId: inbound.chatId }, "downloading an attachment failed");
      const reason = err instanceof ChannelError ? `: ${err.message}` : "";
      return { note: `[${label} "${name}" could not be downloaded${reason}]` };
    }
    if ((file.kind === "voice" || file.kind === "audio") && this.opts.transcriber) {
      return { path, note: await this.transcribe(path, label, signal) };
    }
    return inbound.content === "" ? { path, note: `[${label}]` } : { path };
  }

  private async transcribe(path: string, label: string, signal: AbortSignal): Promise<string> {
    try {
      const text = await this.opts.transcriber!.transcribe(path, signal);
      return text ? `[${label}, transcribed: ${text}]` : `[${label}: no speech recognised]`;
    } catch (err) {
      this.opts.log.warn({ err: errorMessage(err) }, "transcribing a voice message failed");
      return `[${label}: transcription failed; the audio file is attached]`;
    }
  }
}

/** The message with note lines under its text. */
function withNotes(msg: InboundMessage, notes: readonly string[]): InboundMessage {
  if (notes.length === 0) return msg;
  const content = [msg.content, ...notes].filter((line) => line !== "").join("\n");
  return { ...msg, content };
}
