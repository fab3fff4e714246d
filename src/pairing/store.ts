/**
 * Pairing state: codes given to strangers and waiting for the owner, and the senders the owner
 * approved. One document shared by the gateway (which gives codes and welcomes the approved) and
 * `palaver pairing` (which approves and revokes): the file `<state>/pairing/pairing.json` (0600,
 * util/state-file.ts), or in cluster mode the row "pairing.json" of palaver.documents that every
 * instance shares (db/documents.ts). A change by one reaches the others at their next read.
 * Reads are synchronous; changes are awaited (the database's take a row lock).
 *
 * Approved senders live here, not in `allowFrom`: the config stays the owner's to edit, and a
 * revoke needs no reload.
 */
import { join } from "node:path";
import * as z from "zod";
import { logger, type Logger } from "../log.js";
import type { DocumentKind, SharedDocument } from "../util/shared-document.js";
import { StateFile } from "../util/state-file.js";
import { newPairingCode, normalizeCode } from "./codes.js";

/** A code is good for an hour. */
export const CODE_TTL_MS = 60 * 60 * 1000;
/**
 * Open codes per platform: a crowd of strangers cannot fill the file or the owner's list. A full
 * platform drops its oldest code for a newcomer rather than turning the newcomer away, so a few
 * strangers cannot hold every slot; each sender asks at most once an hour (channels/access.ts
 * NoticeLimiter), so pushing a code out takes this many other senders.
 */
export const MAX_PENDING_PER_CHANNEL = 10;

const PendingSchema = z.object({
  code: z.string(),
  channel: z.string(),
  senderId: z.string(),
  /** The direct chat the code was given in: where the welcome goes. */
  chatId: z.string(),
  createdAt: z.number(),
});

const ApprovedSchema = z.object({
  channel: z.string(),
  senderId: z.string(),
  chatId: z.string(),
  approvedAt: z.number(),
  /** "cli", or `<channel>:<senderId>` of the owner who sent /pairing approve. */
  approvedBy: z.string(),
  /** Whether the gateway has told them they are in (the CLI cannot; the gateway does it when it sees this false). */
  welcomed: z.boolean(),
});

const PairingFileSchema = z.object({
  version: z.literal(1),
  pending: z.array(PendingSchema),
  approved: z.array(ApprovedSchema),
});

export type PendingCode = z.infer<typeof PendingSchema>;
export type ApprovedSender = z.infer<typeof ApprovedSchema>;
type PairingFile = z.infer<typeof PairingFileSchema>;

/** The pairing document: the file's schema, also the database row's. */
export const PAIRING_DOCUMENT: DocumentKind<PairingFile> = {
  schema: PairingFileSchema,
  empty: () => ({ version: 1, pending: [], approved: [] }),
  what: "the pairing file",
};

/** What a stranger's request came to: their code (new or still open), and the code it pushed out, if any. */
export interface CodeRequest {
  code: string;
  expiresAt: number;
  dropped?: PendingCode;
}

/** What approving a code came to. */
export type ApproveResult =
  { ok: true; approved: ApprovedSender } | { ok: false; reason: "malformed" | "unknown" };

export function pairingPath(stateDir: string): string {
  return join(stateDir, "pairing", "pairing.json");
}

export class PairingStore {
  private readonly file: SharedDocument<PairingFile>;

  /** `where`: the pairing file's path (pairingPath), or the cluster's document (PAIRING_DOCUMENT). */
  constructor(
    where: string | SharedDocument<PairingFile>,
    private readonly opts: { now?: () => number; log?: Logger } = {},
  ) {
    this.file =
      typeof where === "string"
        ? new StateFile(where, { ...PAIRING_DOCUMENT, log: opts.log ?? logger("pairing") })
        : where;
  }

  private now(): number {
    return (this.opts.now ?? Date.now)();
  }

  /** Codes still open, oldest first. */
  pending(): PendingCode[] {
    return this.file.read().pending.filter((p) => this.live(p));
  }

  approved(channel?: string): ApprovedSender[] {
    const all = this.file.read().approved;
    return channel === undefined ? [...all] : all.filter((a) => a.channel === channel);
  }

  isApproved(channel: string, senderId: string): boolean {
    return this.file.read().approved.some((a) => a.channel === channel && a.senderId === senderId);
  }

  /** Whether the document changed since this process last read or wrote it (the gateway's poller). */
  changed(): boolean {
    return this.file.changed();
  }

  /**
   * A stranger wrote in a direct chat: their open code if they have one (one code per sender; a
   * restart forgot that they were told), else a new one, for which a full platform drops its
   * oldest code (see MAX_PENDING_PER_CHANNEL).
   */
  async request(channel: string, senderId: string, chatId: string): Promise<CodeRequest> {
    return await this.file.update<CodeRequest>((data) => {
      const pending = data.pending.filter((p) => this.live(p));
      const own = pending.find((p) => p.channel === channel && p.senderId === senderId);
      if (own) return { result: { code: own.code, expiresAt: own.createdAt + CODE_TTL_MS } };
      const dropped = oldestIfFull(pending.filter((p) => p.channel === channel));
      const kept = pending.filter((p) => p !== dropped);
      const taken = new Set(pending.map((p) => p.code));
      let code = newPairingCode();
      while (taken.has(code)) code = newPairingCode();
      const createdAt = this.now();
      return {
        next: { ...data, pending: [...kept, { code, channel, senderId, chatId, createdAt }] },
        result: { code, expiresAt: createdAt + CODE_TTL_MS, ...(dropped ? { dropped } : {}) },
      };
    });
  }

  /** Approves an open code: its sender is let in (and will be welcomed); the code is used up. */
  async approve(input: string, approvedBy: string): Promise<ApproveResult> {
    const code = normalizeCode(input);
    if (!code) return { ok: false, reason: "malformed" };
    return await this.file.update<ApproveResult>((data) => {
      const pending = data.pending.filter((p) => this.live(p));
      const match = pending.find((p) => p.code === code);
      if (!match) return { result: { ok: false, reason: "unknown" } };
      const approved: ApprovedSender = {
        channel: match.channel,
        senderId: match.senderId,
        chatId: match.chatId,
        approvedAt: this.now(),
        approvedBy,
        welcomed: false,
      };
      const others = data.approved.filter(
        (a) => !(a.channel === match.channel && a.senderId === match.senderId),
      );
      return {
        next: {
          ...data,
          pending: pending.filter(
            (p) => p !== match && !(p.channel === match.channel && p.senderId === match.senderId),
          ),
          approved: [...others, approved],
        },
        result: { ok: true, approved },
      };
    });
  }

  /**
   * Drops the sender's open code (they left or blocked the bot in the chat it was given in, so
   * nobody is there to welcome and their slot is freed for a newcomer); false when they had none.
   */
  async dropPending(channel: string, senderId: string): Promise<boolean> {
    return await this.file.update((data) => {
      const kept = data.pending.filter((p) => !(p.channel === channel && p.senderId === senderId));
      if (kept.length === data.pending.length) return { result: false };
      return { next: { ...data, pending: kept }, result: true };
    });
  }

  /** Takes an approved sender out again; false when they were not approved. */
  async revoke(channel: string, senderId: string): Promise<boolean> {
    return await this.file.update((data) => {
      const kept = data.approved.filter((a) => !(a.channel === channel && a.senderId === senderId));
      if (kept.length === data.approved.length) return { result: false };
      return { next: { ...data, approved: kept }, result: true };
    });
  }

  /**
   * Records that these senders are told they are in, so nobody is welcomed twice: the ones this call
   * marked (not welcomed yet, as the document is now), which the caller then welcomes. Two
   * gateways of a cluster marking the same sender: one gets them, the other an empty list.
   */
  async markWelcomed(
    who: readonly Pick<ApprovedSender, "channel" | "senderId">[],
  ): Promise<ApprovedSender[]> {
    if (who.length === 0) return [];
    const key = (a: Pick<ApprovedSender, "channel" | "senderId">) => `${a.channel}\n${a.senderId}`;
    const done = new Set(who.map(key));
    return await this.file.update((data) => {
      const marked = data.approved.filter((a) => !a.welcomed && done.has(key(a)));
      if (marked.length === 0) return { result: [] };
      const approved = data.approved.map((a) => (done.has(key(a)) ? { ...a, welcomed: true } : a));
      return { next: { ...data, approved }, result: marked };
    });
  }

  private live(p: PendingCode): boolean {
    return this.now() - p.createdAt < CODE_TTL_MS;
  }
}

/** The code to drop for a new one when a platform's open codes are at the limit: the oldest. */
function oldestIfFull(platformCodes: readonly PendingCode[]): PendingCode | undefined {
  if (platformCodes.length < MAX_PENDING_PER_CHANNEL) return undefined;
  return platformCodes.reduce((oldest, p) => (p.createdAt < oldest.createdAt ? p : oldest));
}
