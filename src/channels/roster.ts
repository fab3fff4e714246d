/**
 * The channels a manager runs, and the life of each: started in the background and retried with
 * backoff while the others run, joined or replaced on a config reload, stopped in reverse order of
 * adding. Its state and last error are what /healthz and /status show.
 */
import { redactText, type Logger } from "../log.js";
import { backoffDelay, sleep } from "../util/backoff.js";
import { errorMessage } from "../util/errors.js";
import type { Channel, InboundSink } from "./types.js";

export interface ChannelOptions {
  /** User ids allowed in; "*" for everybody, empty for nobody. */
  allowFrom: readonly string[];
  /** Override channels.sendProgress / sendToolHints for this channel (the terminal shows both). */
  sendProgress?: boolean;
  sendToolHints?: boolean;
  /** Override channels.streaming and the stream interval for this channel. */
  streaming?: boolean;
  streamIntervalMs?: number;
}

export type ChannelState = "stopped" | "starting" | "running" | "retrying";

export interface RosterEntry {
  readonly channel: Channel;
  readonly options: ChannelOptions;
  readonly state: ChannelState;
}

interface Entry extends RosterEntry {
  state: ChannelState;
  lastError?: string;
  /** The background start-and-retry task. */
  starting?: Promise<void>;
  /** Ends this channel's start retries (removal); the roster's lifetime ends everyone's. */
  stopRetrying?: AbortController;
}

export interface RosterOptions {
  log: Logger;
  /** First and longest wait between start attempts (default 2 s and 5 min). */
  retryBaseMs?: number;
  retryMaxMs?: number;
  /** Where a channel hands what it receives. */
  sinkFor(name: string, allowFrom: readonly string[]): InboundSink;
  /** A channel started (again): what waited for it can go out. */
  onRunning(channel: Channel): void;
}

export class ChannelRoster {
  private readonly entries = new Map<string, Entry>();
  private lifetime = new AbortController();
  private launched = false;

  constructor(private readonly opts: RosterOptions) {}

  add(channel: Channel, options: ChannelOptions): void {
    if (this.entries.has(channel.name)) throw new Error(`channel ${channel.name} added twice`);
    this.entries.set(channel.name, { channel, options, state: "stopped" });
  }

  get(name: string): RosterEntry | undefined {
    return this.entries.get(name);
  }

  /** The channel of that name when it runs. */
  running(name: string): RosterEntry | undefined {
    const entry = this.entries.get(name);
    return entry?.state === "running" ? entry : undefined;
  }

  get names(): string[] {
    return [...this.entries.keys()];
  }

  status(): { name: string; state: ChannelState; lastError?: string }[] {
    return [...this.entries.values()].map((e) => ({
      name: e.channel.name,
      state: e.state,
      ...(e.lastError ? { lastError: e.lastError } : {}),
    }));
  }

  /** Starts every channel; resolves once each has started or failed its first attempt. */
  async startAll(): Promise<void> {
    this.lifetime = new AbortController();
    this.launched = true;
    await Promise.all([...this.entries.values()].map((entry) => this.launch(entry)));
  }

  /** Adds a channel and, once the roster has started, starts it too: resolves after its first attempt. */
  async join(channel: Channel, options: ChannelOptions): Promise<void> {
    this.add(channel, options);
    const entry = this.entries.get(channel.name)!;
    if (this.launched && !this.lifetime.signal.aborted) await this.launch(entry);
  }

  /** Replaces (or adds) a channel while the others keep running: config reload. */
  async replace(channel: Channel, options: ChannelOptions): Promise<void> {
    await this.remove(channel.name);
    await this.join(channel, options);
  }

  /** Stops and forgets one channel. */
  async remove(name: string): Promise<void> {
    const entry = this.entries.get(name);
    if (!entry) return;
    this.entries.delete(name);
    entry.stopRetrying?.abort();
    await entry.starting;
    if (entry.state === "running") await this.stopOne(entry);
    entry.state = "stopped";
  }

  /** Gives up connecting (a stop during start): channels still starting are aborted and not retried. */
  abortStarts(): void {
    this.lifetime.abort();
  }

  /** Stops every channel, in reverse order of adding. */
  async stopAll(): Promise<void> {
    this.launched = false;
    this.lifetime.abort();
    for (const entry of [...this.entries.values()].reverse()) {
      await entry.starting;
      if (entry.state === "stopped") continue;
      await this.stopOne(entry);
      entry.state = "stopped";
    }
  }

  private async stopOne(entry: Entry): Promise<void> {
    await entry.channel
      .stop()
      .catch((err: unknown) =>
        this.opts.log.warn({ err, channel: entry.channel.name }, "channel did not stop cleanly"),
      );
  }

  /** Starts one channel in the background; resolves after its first attempt. */
  private launch(entry: Entry): Promise<void> {
    return new Promise<void>((settled) => {
      entry.starting = this.keepStarting(entry, settled);
    });
  }

  private async keepStarting(entry: Entry, firstAttemptSettled: () => void): Promise<void> {
    const name = entry.channel.name;
    entry.stopRetrying = new AbortController();
    const signal = AbortSignal.any([this.lifetime.signal, entry.stopRetrying.signal]);
    const sink = this.opts.sinkFor(name, entry.options.allowFrom);
    for (let attempt = 0; !signal.aborted; attempt++) {
      entry.state = attempt === 0 ? "starting" : "retrying";
      try {
        await entry.channel.start(sink, signal);
        entry.state = "running";
        entry.lastError = undefined;
        this.opts.log.info({ channel: name }, "channel started");
        this.opts.onRunning(entry.channel);
        firstAttemptSettled();
        return;
      } catch (err) {
        // Shown by /healthz and /status, which are not logs: an SDK error may quote a URL with the token.
        entry.lastError = redactText(errorMessage(err));
        const delayMs = backoffDelay(attempt, this.opts.retryBaseMs ?? 2000, this.opts.retryMaxMs ?? 300_000);
        this.opts.log.error(
          { channel: name, err, retryInMs: Math.round(delayMs) },
          `channel ${name} failed to start`,
        );
        entry.state = "retrying";
        firstAttemptSettled();
        try {
          await sleep(delayMs, signal);
        } catch {
          break; // stopped while waiting
        }
      }
    }
    entry.state = "stopped";
  }
}
