/**
 * Telling the owners something (the budget's warning) when some of them have not written since
 * the gateway started. An owner is an entry of a platform's allowFrom or admins (usage/budget.ts
 * decides what to say; this decides where it goes):
 *
 * - the chats owners wrote from since the start get it, as before;
 * - an owner on Telegram named by a numeric user id gets it in their private chat with the bot,
 *   whose chat id is that user id, through the bus like any reply;
 * - any other owner (Slack and Discord need a DM opened first, which the channels do not offer; a
 *   Telegram owner named by @username has no known chat) gets it the first time they write: the
 *   notice waits in `<state>/usage/owner-notices.json`, so a restart does not lose it.
 *
 * Each owner gets each notice once: an owner reached one way is not reached another.
 */
import * as z from "zod";
import type { InboundMessage, OutboundMessage } from "../bus/types.js";
import type { Logger } from "../log.js";
import { StateFile } from "../util/state-file.js";

/** One owner as the config names them: `channels.<channel>.allowFrom` / `admins` entry `id`. */
export interface OwnerRef {
  channel: string;
  id: string;
}

/** Someone who wrote: their chat, and who they are on the platform. */
interface SeenOwner {
  channel: string;
  chatId: string;
  senderId: string;
  aliases: readonly string[];
}

/** Notices kept for owners who have not written; a few per owner (older ones are stale). */
const KEPT_PER_OWNER = 5;

const PendingSchema = z.object({
  pending: z.array(z.object({ channel: z.string(), owner: z.string(), texts: z.array(z.string()) })),
});
type Pending = z.infer<typeof PendingSchema>;

/** Pure: an owner with a chat the bot can write to unasked, or undefined. */
function directChatOf(owner: OwnerRef): string | undefined {
  // A Telegram private chat's id is the user's id; group ids are negative, usernames have no chat.
  return owner.channel === "telegram" && /^[1-9]\d*$/.test(owner.id) ? owner.id : undefined;
}

export interface OwnerNoticesOptions {
  /** The owners as the config names them now, on the platforms that are enabled. */
  owners: () => OwnerRef[];
  /** Whether the inbound message comes from an owner. */
  isOwner: (msg: InboundMessage) => boolean;
  /** Whether a sender (id and aliases) is the config's owner entry `ownerId` (allowFrom's rule). */
  matches: (senderId: string, aliases: readonly string[], ownerId: string) => boolean;
  publish: (msg: OutboundMessage) => void;
  /** `<state>/usage/owner-notices.json` */
  pendingPath: string;
  log: Logger;
}

export class OwnerNotices {
  /** Owners' chats seen since the start, by channel and chat. */
  private readonly chats = new Map<string, SeenOwner>();
  private readonly pending: StateFile<Pending>;

  constructor(private readonly opts: OwnerNoticesOptions) {
    this.pending = new StateFile(opts.pendingPath, {
      schema: PendingSchema,
      empty: () => ({ pending: [] }),
      what: "the owners' waiting notices",
      log: opts.log,
    });
  }

  /** An inbound message: an owner's chat is remembered, and what waits for them is delivered there. */
  seen(msg: InboundMessage): void {
    if (!this.opts.isOwner(msg)) return;
    const aliases = msg.senderAliases ?? [];
    this.chats.set(`${msg.channel}\0${msg.chatId}`, {
      channel: msg.channel,
      chatId: msg.chatId,
      senderId: msg.senderId,
      aliases,
    });
    if (this.pending.read().pending.length === 0) return;
    let texts: string[] = [];
    try {
      texts = this.pending.update((current) => {
        const mine = current.pending.filter(
          (p) => p.channel === msg.channel && this.opts.matches(msg.senderId, aliases, p.owner),
        );
        if (mine.length === 0) return { result: [] };
        const rest = current.pending.filter((p) => !mine.includes(p));
        return { next: { pending: rest }, result: [...new Set(mine.flatMap((p) => p.texts))] };
      });
    } catch (err) {
      this.opts.log.warn({ err, path: this.pending.path }, "could not read the owners' waiting notices");
      return;
    }
    for (const content of texts) this.opts.publish({ channel: msg.channel, chatId: msg.chatId, content });
  }

  /** Tells every owner `text`: in the chats seen, directly where possible, else when they next write. */
  notify(text: string): void {
    const seen = [...this.chats.values()];
    for (const chat of seen) this.opts.publish({ channel: chat.channel, chatId: chat.chatId, content: text });
    const unreached = this.opts
      .owners()
      .filter(
        (owner) =>
          !seen.some(
            (chat) =>
              chat.channel === owner.channel && this.opts.matches(chat.senderId, chat.aliases, owner.id),
          ),
      );
    const waiting: OwnerRef[] = [];
    for (const owner of unreached) {
      const chatId = directChatOf(owner);
      if (chatId !== undefined) this.opts.publish({ channel: owner.channel, chatId, content: text });
      else waiting.push(owner);
    }
    if (waiting.length) this.keep(waiting, text);
  }

  private keep(owners: readonly OwnerRef[], text: string): void {
    try {
      this.pending.update((current) => {
        const next = [...current.pending];
        for (const owner of owners) {
          const i = next.findIndex((p) => p.channel === owner.channel && p.owner === owner.id);
          const texts = [...(i >= 0 ? next[i]!.texts : []), text].slice(-KEPT_PER_OWNER);
          const entry = { channel: owner.channel, owner: owner.id, texts };
          if (i >= 0) next[i] = entry;
          else next.push(entry);
        }
        return { next: { pending: next }, result: undefined };
      });
    } catch (err) {
      // The log line of the warning itself (budget.ts) still says it.
      this.opts.log.warn(
        { err, path: this.pending.path },
        "could not keep a notice for the owners who have not written",
      );
    }
  }
}
