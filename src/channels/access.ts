/** Access control for every channel, in one place. Pure functions plus a small notice limiter. */
import type { InboundMessage } from "../bus/types.js";
import { isSenderAllowed } from "../config/allow-from.js";
import { BoundedMap } from "../util/bounded-map.js";

/**
 * `allowFrom` holds user ids as strings; "*" lets everybody in and an empty
 * list nobody. A channel may add other identities of the sender (a Telegram
 * @username, say) as `senderAliases`.
 */
export function isAllowed(msg: InboundMessage, allowFrom: readonly string[]): boolean {
  return isSenderAllowed(msg.senderId, msg.senderAliases ?? [], allowFrom);
}

/**
 * Who may talk in a channel beyond its allowFrom, and what a refused sender is told (the gateway's
 * is pairing/gate.ts).
 */
type RefusalText = string | null | undefined;

export interface AccessPolicy {
  allows(channel: string, msg: InboundMessage, allowFrom: readonly string[]): boolean;
  /** A button presser not in allowFrom who may press anyway (an approved sender). */
  allowsSender(channel: string, senderId: string): boolean;
  /**
   * Asked once the notice limiter lets the sender be told: the text, null for silence, undefined for
   * the refusal notice. Pairing's is awaited (it records the code it gives).
   */
  refusal(channel: string, msg: InboundMessage): RefusalText | Promise<RefusalText>;
  /** A sender closed their direct chat with the bot (blocked it): what waits on them there is dropped. */
  senderLeft?(channel: string, senderId: string): void;
}

/** allowFrom alone, and the usual refusal notice: the terminal chat and managers without pairing. */
export const ALLOW_FROM_ONLY: AccessPolicy = {
  allows: (_channel, msg, allowFrom) => isAllowed(msg, allowFrom),
  allowsSender: () => false,
  refusal: () => undefined,
};

/** What a refused sender is told: its own id and the exact config key that would let it in. */
export function refusalNotice(channel: string, senderId: string): string {
  return (
    `Sorry, I only talk to people on my allow list. Your ${channel} user id is ${senderId}. ` +
    `To let yourself in, add "${senderId}" to channels.${channel}.allowFrom in palaver's config ` +
    // allowFrom is re-read on SIGHUP (cli/gateway.ts): a restart is not needed.
    `(or set it to ["*"] to allow everybody), then reload palaver ` +
    "(`systemctl reload palaver`, or send it SIGHUP); no restart is needed."
  );
}

const HOUR_MS = 60 * 60 * 1000;
const MAX_TRACKED = 10_000;

/** Remembers when each refused sender was last told, so nobody is told more than once an hour. */
export class NoticeLimiter {
  private readonly told: BoundedMap<string, true>;

  constructor(intervalMs = HOUR_MS, now: () => number = Date.now) {
    this.told = new BoundedMap(MAX_TRACKED, intervalMs, now);
  }

  /** True when the sender should be told now (and records that it was). */
  shouldNotify(channel: string, senderId: string): boolean {
    const key = `${channel}:${senderId}`;
    if (this.told.has(key)) return false;
    this.told.set(key, true);
    return true;
  }
}
