/**
 * Pairing in a running gateway: who may write in direct messages besides allowFrom, what a
 * stranger is told, the owner's `/pairing` command, and the welcome for the newly approved.
 *
 * The channel manager asks `allows` before anything else happens to a message and `refusal` for
 * what to answer a refused one (channels/access.ts `AccessPolicy`); the agent loop hands it
 * `/pairing` (agent/loop.ts `PairingCommands`). Everything is decided by the channel's dmPolicy as
 * configured now. Pairing never lets anyone into a group: only a message its platform marks as a
 * direct one (`isGroup === false`) can be paired or let in by pairing.
 *
 * Welcomes: approving (here or by `palaver pairing approve` in another process) records the sender
 * with `welcomed: false`; a poller (one look a second) sees the store change, marks them welcomed
 * and publishes the welcome of each it marked as an ordinary reply, which the manager delivers (or
 * keeps while the channel is down). Marking first is what welcomes each once when several gateways
 * of a cluster see the same approval: only one of them marks a sender.
 * Approvals older than a day are marked welcomed without a message, so a gateway started after a
 * long pause does not greet people out of the blue; at most WELCOMES_PER_ROUND go out per round.
 */
import type { InboundMessage, OutboundMessage } from "../bus/types.js";
import { isAllowed } from "../channels/access.js";
import { dmPolicyOf, isOwner } from "../config/allow-from.js";
import type { DmPolicy } from "../config/platforms/common.js";
import type { Config } from "../config/schema.js";
import { logger, type Logger } from "../log.js";
import { CODE_TTL_MS, type ApprovedSender, type PairingStore } from "./store.js";

const DAY_MS = 24 * 60 * 60 * 1000;
const WELCOMES_PER_ROUND = 20;

export interface PairingGateOptions {
  store: PairingStore;
  /** The config as it is now (the gateway's follows SIGHUP). */
  config: () => Pick<Config, "channels">;
  /** Where welcomes go: the bus, whose replies the manager delivers. */
  publish: (msg: OutboundMessage) => void;
  /** How often the store is checked for approvals made by another process (default 1 s). */
  pollIntervalMs?: number;
  now?: () => number;
  log?: Logger;
}

/** A direct message, as its platform says; anything unsaid counts as a group. */
function isDirectMessage(msg: Pick<InboundMessage, "isGroup">): boolean {
  return msg.isGroup === false;
}

export class PairingGate {
  private timer: NodeJS.Timeout | undefined;
  private readonly log: Logger;

  constructor(private readonly opts: PairingGateOptions) {
    this.log = opts.log ?? logger("pairing");
  }

  /** Starts watching for approvals made elsewhere; welcomes any waiting now (resolved when done; never rejects). */
  start(): Promise<void> {
    if (this.timer) return Promise.resolve();
    this.timer = setInterval(() => {
      if (this.opts.store.changed()) void this.welcome();
    }, this.opts.pollIntervalMs ?? 1000);
    this.timer.unref();
    return this.welcome();
  }

  stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }

  /** Whether this message's sender may talk to the bot in `channel`. */
  allows(channel: string, msg: InboundMessage, allowFrom: readonly string[]): boolean {
    if (!isDirectMessage(msg)) return isAllowed(msg, allowFrom);
    switch (this.policy(channel)) {
      case "disabled":
        return false;
      case "pairing":
        return isAllowed(msg, allowFrom) || this.opts.store.isApproved(channel, msg.senderId);
      case "allowlist":
      case "open": // "open" is allowFrom ["*"] (config/platforms/common.ts dmPolicyProblems)
        return isAllowed(msg, allowFrom);
    }
  }

  /** A button presser not in allowFrom: an approved sender may answer what their own turns ask. */
  allowsSender(channel: string, senderId: string): boolean {
    return this.policy(channel) === "pairing" && this.opts.store.isApproved(channel, senderId);
  }

  /**
   * What a refused sender is told (asked only when the notice limiter lets them be told): a pairing
   * code in a direct message under "pairing"; nothing under "disabled"; undefined for the usual
   * refusal notice (groups, "allowlist").
   */
  async refusal(channel: string, msg: InboundMessage): Promise<string | null | undefined> {
    if (!isDirectMessage(msg)) return undefined;
    const policy = this.policy(channel);
    if (policy === "disabled") return null;
    if (policy !== "pairing") return undefined;
    let request;
    try {
      request = await this.opts.store.request(channel, msg.senderId, msg.chatId);
    } catch (err) {
      this.log.error(
        { err, channel, senderId: msg.senderId },
        "cannot give a pairing code: the pairing file is unusable",
      );
      return "Hi! I only talk to people my owner has approved, and I cannot take requests right now. Please try again later.";
    }
    if (request.dropped) {
      // Their code is gone; asking again after the notice interval gives them a new one.
      this.log.warn(
        { channel, senderId: request.dropped.senderId },
        "pairing code dropped for a newcomer's: too many codes waiting",
      );
    }
    this.log.info({ channel, senderId: msg.senderId }, "pairing code given");
    return pairingNotice(request.code, channel, msg.senderId);
  }

  /**
   * A sender closed their direct chat with the bot (blocked or left it): their open code, if any,
   * is dropped, so a stranger cannot keep a slot after walking away. Nothing else happens: no
   * reply, and an approval stays (only the owner revokes).
   */
  async senderLeft(channel: string, senderId: string): Promise<void> {
    let dropped;
    try {
      dropped = await this.opts.store.dropPending(channel, senderId);
    } catch (err) {
      this.log.warn({ err, channel, senderId }, "cannot drop the pairing code of a sender who left");
      return;
    }
    if (dropped) this.log.info({ channel, senderId }, "pairing code dropped: the sender left the chat");
  }

  /** The ids approved in `channel` while its dmPolicy is "pairing" (the cron scheduler, the message tool). */
  approvedIds(channel: string): string[] {
    if (this.policy(channel) !== "pairing") return [];
    return this.opts.store.approved(channel).map((a) => a.senderId);
  }

  /** `/pairing <args>` from `msg`'s sender: only an owner may use it. */
  async command(msg: InboundMessage, args: string): Promise<string> {
    if (!isOwner(this.opts.config(), msg))
      return "Only the owner can approve pairing codes (someone in allowFrom or admins of this channel).";
    const [verb = "", code = ""] = args.split(/\s+/);
    if (verb.toLowerCase() === "list") return this.listText();
    if (verb.toLowerCase() !== "approve" || !code) return "Usage: /pairing approve <code>, or /pairing list";
    const result = await this.opts.store.approve(code, `${msg.channel}:${msg.senderId}`);
    if (!result.ok) {
      return result.reason === "malformed"
        ? `"${code}" is not a pairing code: codes are 8 letters and digits, like K7M2QX9B.`
        : `No open pairing code ${code.toUpperCase()}: it is mistyped, expired (codes last an hour) or used already.`;
    }
    const { approved } = result;
    this.log.info(
      { channel: approved.channel, senderId: approved.senderId, by: approved.approvedBy },
      "pairing approved",
    );
    await this.welcome();
    return `Approved: ${approved.channel} user ${approved.senderId} can talk to me now, and I've told them.`;
  }

  /** For /status. */
  statusLine(): string {
    const approved = this.opts.store.approved().length;
    const waiting = this.opts.store.pending().length;
    return `Pairing: ${approved} approved ${approved === 1 ? "person" : "people"}, ${waiting} ${waiting === 1 ? "code" : "codes"} waiting`;
  }

  /** Tells the newly approved they are in (see the header), each once. Never throws. */
  private async welcome(): Promise<void> {
    const now = (this.opts.now ?? Date.now)();
    let waiting;
    try {
      waiting = this.opts.store.approved().filter((a) => !a.welcomed);
    } catch (err) {
      this.log.warn({ err }, "cannot read the pairing file");
      return;
    }
    const stale = waiting.filter((a) => now - a.approvedAt > DAY_MS);
    const due = waiting
      .filter((a) => now - a.approvedAt <= DAY_MS && this.policy(a.channel) === "pairing")
      .slice(0, WELCOMES_PER_ROUND);
    if (stale.length === 0 && due.length === 0) return;
    let marked: Set<string> | undefined;
    try {
      const done = await this.opts.store.markWelcomed([...stale, ...due]);
      marked = new Set(done.map(senderKey));
    } catch (err) {
      // Welcomed again at the next change of the store at worst: a repeated hello, never a lost one.
      this.log.warn({ err }, "cannot record the welcome in the pairing file");
    }
    for (const a of due) {
      // Marked by another gateway of the cluster (or an earlier round here): welcomed there.
      if (marked && !marked.has(senderKey(a))) continue;
      this.opts.publish({
        channel: a.channel,
        chatId: a.chatId,
        content: "You're in: my owner approved you. Send me a message and I'll answer.",
      });
      this.log.info({ channel: a.channel, senderId: a.senderId }, "approved sender welcomed");
    }
  }

  private listText(): string {
    const pending = this.opts.store.pending();
    if (pending.length === 0) return "No pairing codes are waiting.";
    const now = (this.opts.now ?? Date.now)();
    return [
      "Pairing codes waiting:",
      ...pending.map(
        (p) =>
          `${p.code}: ${p.channel} user ${p.senderId}, expires in ${Math.max(1, Math.ceil((p.createdAt + CODE_TTL_MS - now) / 60_000))} min`,
      ),
    ].join("\n");
  }

  private policy(channel: string): DmPolicy {
    return dmPolicyOf(this.opts.config(), channel) ?? "allowlist";
  }
}

function senderKey(a: Pick<ApprovedSender, "channel" | "senderId">): string {
  return `${a.channel}\n${a.senderId}`;
}

/**
 * The one reply a stranger gets: the code and what to tell the owner. Their id too, for an owner who
 * would rather list them in allowFrom (the refusal notice's advice, channels/access.ts).
 */
function pairingNotice(code: string, channel: string, senderId: string): string {
  return (
    `Hi! I only talk to people my owner has approved. To ask for access, send my owner this pairing code: ${code}\n` +
    `They can approve it with \`palaver pairing approve ${code}\`, or by sending \`/pairing approve ${code}\` ` +
    "in their own chat with me. The code expires in an hour. " +
    `(Your ${channel} user id is ${senderId}, should they rather add it to channels.${channel}.allowFrom.)`
  );
}
