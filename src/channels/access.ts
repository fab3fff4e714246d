/** Access control for every channel, in one place. Pure functions plus a small notice limiter. */
import type { InboundMessage } from "../bus/types.js";

/**
 * `allowFrom` holds user ids as strings; "*" lets everybody in and an empty
 * list nobody. A channel may add other identities of the sender (a Telegram
 * @username, say) as `metadata.senderAliases`.
 */
export function isAllowed(msg: InboundMessage, allowFrom: readonly string[]): boolean {
  return isSenderAllowed(msg.senderId, senderAliasesOf(msg.metadata), allowFrom);
}

/** The same rule for a sender known by id and aliases only (a cron job's creator, say). */
export function isSenderAllowed(
  senderId: string,
  aliases: readonly string[],
  allowFrom: readonly string[],
): boolean {
  if (allowFrom.includes("*")) return true;
  return [senderId, ...aliases].some(
    (id) => allowFrom.includes(id) || allowFrom.includes(id.replace(/^@/, "")),
  );
}

/** `metadata.senderAliases`, keeping only strings. */
export function senderAliasesOf(metadata: Record<string, unknown> | undefined): string[] {
  const aliases = metadata?.senderAliases;
  return Array.isArray(aliases) ? aliases.filter((a): a is string => typeof a === "string") : [];
}

/** What a refused sender is told: its own id and the exact config key that would let it in. */
export function refusalNotice(channel: string, senderId: string): string {
  return (
    `Sorry, I only talk to people on my allow list. Your ${channel} user id is ${senderId}. ` +
    `To let yourself in, add "${senderId}" to channels.${channel}.allowFrom in palaver's config ` +
    `(or set it to ["*"] to allow everybody), then restart palaver.`
  );
}

const HOUR_MS = 60 * 60 * 1000;
const MAX_TRACKED = 10_000;

/** Remembers when each refused sender was last told, so nobody is told more than once an hour. */
export class NoticeLimiter {
  private readonly lastNotice = new Map<string, number>();

  constructor(
    private readonly intervalMs = HOUR_MS,
    private readonly now: () => number = Date.now,
  ) {}

  /** True when the sender should be told now (and records that it was). */
  shouldNotify(channel: string, senderId: string): boolean {
    const key = `${channel}:${senderId}`;
    const now = this.now();
    const last = this.lastNotice.get(key);
    if (last !== undefined && now - last < this.intervalMs) return false;
    this.lastNotice.delete(key); // re-insert so the Map stays in age order
    this.lastNotice.set(key, now);
    if (this.lastNotice.size > MAX_TRACKED) {
      const oldest = this.lastNotice.keys().next().value;
      if (oldest !== undefined) this.lastNotice.delete(oldest);
    }
    return true;
  }
}
