/**
 * A reply shown while the model writes it, then finalized in place: the one engine behind every
 * platform's streaming (Telegram edits, Slack chat.update, Discord message edits). The platform
 * gives a `PreviewSurface` (post a message, edit one, its formatted final parts); this decides
 * when to call it:
 *
 * - at most one platform call per `intervalMs` per reply, and only the newest text is sent: text
 *   that arrives while a call is in flight or the interval runs is coalesced, never queued;
 * - a rate limit (a ChannelError with retryAfterMs) waits what the platform asked, then sends the
 *   newest text; any other failure ends the preview (the final goes out as a new message);
 * - past the platform's length limit the message is frozen and the text continues in a new one;
 * - `finish` replaces the preview with the formatted final, exactly once, and says whether it could:
 *   when it could not, the caller sends the final as a new message (the preview stays as it was);
 * - `stop` leaves the text shown so far with a visible mark and sends nothing more.
 */
import { sleep } from "../util/backoff.js";
import { ChannelError } from "../util/errors.js";
import { splitMessage } from "./text.js";
import type { PreviewSurface } from "./types.js";

export interface LivePreviewOptions {
  intervalMs: number;
  /** Waits that a rate limit may ask for before the preview gives up (default 30 s). */
  maxRetryAfterMs?: number;
  /** A message was posted: the refs of all its messages so far (the manager journals them). */
  onPosted?(refs: readonly string[]): void;
  /** Finished, stopped or closed, once: whatever is on screen now stays for good. */
  onEnded?(): void;
}

/** What stopping adds under the text shown so far. */
export const STOPPED_MARK = "\n\n⏹ stopped";

export class LivePreview {
  /** The messages the preview occupies, oldest first (the last one is the one still growing). */
  private readonly refs: string[] = [];
  /** The text of each message as the platform shows it now. */
  private readonly shown: string[] = [];
  private latest = "";
  private lastCallAt = Number.NEGATIVE_INFINITY;
  private timer: NodeJS.Timeout | undefined;
  private inFlight: Promise<void> = Promise.resolve();
  private busy = false;
  /** Set once the preview gives up (a failure) or is finished/stopped: nothing more is sent by updates. */
  private closed = false;
  private broken = false;
  private ended = false;

  constructor(
    private readonly surface: PreviewSurface,
    private readonly opts: LivePreviewOptions,
  ) {}

  /** Whether anything is on screen. */
  get visible(): boolean {
    return this.refs.length > 0;
  }

  /** The reply's text so far (the whole text, not an increment). */
  update(textSoFar: string): void {
    if (this.closed || !textSoFar.trim()) return;
    this.latest = textSoFar;
    this.schedule();
  }

  private schedule(delayMs = this.lastCallAt + this.opts.intervalMs - Date.now()): void {
    if (this.busy || this.timer || this.closed) return;
    if (delayMs <= 0) {
      this.run();
      return;
    }
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.run();
    }, delayMs);
  }

  private run(): void {
    this.busy = true;
    this.inFlight = this.render(this.latest).then(
      () => {
        this.busy = false;
        // Text that came while this call was out goes in the next one, an interval later.
        if (this.wanted(this.latest)) this.schedule();
      },
      (err: unknown) => {
        this.busy = false;
        const wait = err instanceof ChannelError ? err.retryAfterMs : undefined;
        if (wait !== undefined && wait <= (this.opts.maxRetryAfterMs ?? 30_000)) {
          this.schedule(wait);
          return;
        }
        this.broken = true;
        this.closed = true;
      },
    );
  }

  private wanted(text: string): boolean {
    return !this.closed && splitMessage(text, this.surface.maxChars).join("") !== this.shown.join("");
  }

  /** Shows `parts` (one per message): edits what changed, posts what is new. */
  private async show(parts: string[], formatted: boolean): Promise<void> {
    for (let i = 0; i < parts.length; i++) {
      const part = parts[i]!;
      if (i < this.refs.length) {
        // A preview text already shown needs no call. A final part always gets its call, even when it
        // reads the same: a preview may vanish on its own (a Telegram draft) unless the final is sent.
        if (this.shown[i] === part && !formatted) continue;
        this.lastCallAt = Date.now();
        await this.surface.edit(this.refs[i]!, part, formatted);
      } else {
        this.lastCallAt = Date.now();
        this.refs.push(await this.surface.post(part, formatted));
        this.opts.onPosted?.([...this.refs]);
      }
      this.shown[i] = part;
    }
  }

  private render(text: string): Promise<void> {
    return this.show(splitMessage(text, this.surface.maxChars), false);
  }

  /** Ends updates and waits for the call in flight; what is on screen stays as it is. */
  async close(): Promise<void> {
    await this.halt();
    this.end();
  }

  private async halt(): Promise<void> {
    this.closed = true;
    clearTimeout(this.timer);
    this.timer = undefined;
    await this.inFlight;
  }

  /**
   * Replaces the preview with the final answer. True when it is on screen in place of the preview;
   * false when the caller must send it as a new message (nothing was shown, the preview broke, or
   * the final edit failed). A rate limit on the final edit is waited out and tried again.
   */
  async finish(content: string): Promise<boolean> {
    try {
      return await this.replaceWith(content);
    } finally {
      this.end();
    }
  }

  private async replaceWith(content: string): Promise<boolean> {
    await this.halt();
    if (this.broken || this.refs.length === 0 || this.surface.finalInPlace === false) return false;
    const parts = this.surface.finalParts(content);
    for (let attempt = 0; ; attempt++) {
      try {
        await this.show(parts, true);
        // A final shorter than its preview: the leftover messages say where the answer is.
        for (let i = parts.length; i < this.refs.length; i++) {
          if (this.shown[i] !== "…") await this.surface.edit(this.refs[i]!, "…", false);
          this.shown[i] = "…";
        }
        return true;
      } catch (err) {
        const wait = err instanceof ChannelError ? err.retryAfterMs : undefined;
        if (wait === undefined || attempt >= 5) return false;
        await sleep(Math.min(wait, this.opts.maxRetryAfterMs ?? 30_000));
      }
    }
  }

  /** /stop: the text shown so far stays, marked stopped; nothing more is sent. */
  async stop(): Promise<void> {
    try {
      await this.markStopped();
    } finally {
      this.end();
    }
  }

  private async markStopped(): Promise<void> {
    await this.halt();
    const last = this.refs.length - 1;
    if (this.broken || last < 0) return;
    const marked = this.shown[last]! + STOPPED_MARK;
    if (marked.length > this.surface.maxChars) return;
    const ref = this.refs[last]!;
    const leave = this.surface.stopped?.(ref, marked) ?? this.surface.edit(ref, marked, false);
    await leave.catch(() => undefined);
  }

  private end(): void {
    if (this.ended) return;
    this.ended = true;
    this.opts.onEnded?.();
  }
}
