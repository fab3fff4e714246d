/**
 * The lines of the message journal, one zod schema per entry type. Every
 * line read back at startup is validated against {@link JournalEntry}: a
 * line of the wrong shape is skipped (and kept in `messages.jsonl.corrupt`)
 * instead of crashing every start.
 *
 * To add an entry type (a tool-call record, say): add its schema to the
 * union below, handle it in Journal.apply, and write it again in
 * Journal.compact if it must outlive a compaction.
 */
import * as z from "zod";
import { legacyReplyPlace, withLegacyPlace } from "../bus/legacy-place.js";

const id = z.string().min(1);
const metadata = z.record(z.string(), z.unknown());

/** An InboundMessage as journaled (fields this version does not know are dropped). */
export const InboundSchema = z
  .object({
    channel: z.string(),
    senderId: z.string(),
    chatId: z.string(),
    content: z.string(),
    media: z.array(z.string()).optional(),
    messageId: z.string().optional(),
    senderAliases: z.array(z.string()).optional(),
    isGroup: z.boolean().optional(),
    threadId: z.string().optional(),
    interactionId: z.string().optional(),
    metadata: metadata.optional(),
    sessionKey: z.string().optional(),
  })
  .transform((msg) => withLegacyOrigin(withLegacyPlace(liftLegacyFields(msg))));

/**
 * Lines written before these fields were typed kept them in `metadata`: they are read into the
 * typed fields, so a message journaled by an older version replays the same way.
 */
function liftLegacyFields<T extends LegacyInbound>(msg: T): T {
  const legacy = msg.metadata ?? {};
  const lifted: LegacyInbound = {};
  const id = legacy.messageId;
  if (msg.messageId === undefined && (typeof id === "string" || typeof id === "number"))
    lifted.messageId = String(id);
  const aliases = legacy.senderAliases;
  if (msg.senderAliases === undefined && Array.isArray(aliases))
    lifted.senderAliases = aliases.filter((a): a is string => typeof a === "string");
  if (msg.isGroup === undefined && typeof legacy.isGroup === "boolean") lifted.isGroup = legacy.isGroup;
  return Object.keys(lifted).length ? { ...msg, ...lifted } : msg;
}

/**
 * A system message's origin chat (bus/types.ts systemMessage) rides in its metadata; an older
 * version kept that origin's thread in the origin's own metadata.
 */
function withLegacyOrigin<T extends { metadata?: Record<string, unknown> | undefined }>(msg: T): T {
  const origin = msg.metadata?.origin;
  if (origin === null || typeof origin !== "object" || Array.isArray(origin)) return msg;
  const typed = origin as Record<string, unknown>;
  if (typed.threadId !== undefined) return msg;
  const place = legacyReplyPlace(typed.metadata);
  if (place.threadId === undefined && place.interactionId === undefined) return msg;
  return { ...msg, metadata: { ...msg.metadata, origin: { ...typed, ...place } } };
}

interface LegacyInbound {
  messageId?: string | undefined;
  senderAliases?: string[] | undefined;
  isGroup?: boolean | undefined;
  metadata?: Record<string, unknown> | undefined;
}

/** An OutboundMessage as journaled. */
export const OutboundSchema = z.object({
  channel: z.string(),
  chatId: z.string(),
  content: z.string(),
  media: z.array(z.string()).optional(),
  replyTo: z.string().optional(),
  kind: z.enum(["final", "progress", "toolHint", "question", "edit", "delta", "plan"]).optional(),
  threadId: z.string().optional(),
  interactionId: z.string().optional(),
  metadata: metadata.optional(),
});

/** A reply given up (or dropped by `palaver outbox drop`), with why. */
const Dropped = z.object({ t: z.literal("dropped"), id, reason: z.string() });

export const JournalEntry = z.discriminatedUnion("t", [
  /** An admitted message; a later "in" line with the same id replaces it (a reservation finished). */
  z.object({
    t: z.literal("in"),
    id,
    at: z.number(),
    key: z.string().optional(),
    /** Turns begun on it so far (written by compaction; "start" lines add to it). */
    starts: z.number().int().nonnegative().optional(),
    msg: InboundSchema,
  }),
  /** A turn began on message `id`. */
  z.object({ t: z.literal("start"), id }),
  /** Its turn ended; its final reply is already in the outbox. */
  z.object({ t: z.literal("done"), id }),
  /** Given up after too many starts without finishing (a poison message); never replayed. */
  z.object({ t: z.literal("failed"), id, starts: z.number().int().nonnegative() }),
  /** A final reply to send (an older version's thread in its `metadata` is lifted). */
  z.object({ t: z.literal("out"), id, at: z.number(), msg: OutboundSchema.transform(withLegacyPlace) }),
  z.object({ t: z.literal("sent"), id }),
  Dropped,
  /** A platform message id already admitted (de-duplication of redeliveries). */
  z.object({ t: z.literal("seen"), key: z.string() }),
  /**
   * A live preview is on screen (its first message posted, or a continuation): where it is, never
   * its text. A later line with the same id replaces it (more refs).
   */
  z
    .object({
      t: z.literal("preview"),
      id,
      turnId: id,
      channel: z.string(),
      chatId: z.string(),
      threadId: z.string().optional(),
      metadata: metadata.optional(),
      /** The platform's refs of its messages, oldest first (opaque strings). */
      refs: z.array(z.string()).min(1),
    })
    .transform(withLegacyPlace),
  /** The preview was finished, stopped or closed: nothing to repair after a crash. */
  z.object({ t: z.literal("previewClosed"), id }),
]);
export type JournalEntry = z.infer<typeof JournalEntry>;

/**
 * The ids of the "dropped" lines of journal text, other lines unparsed (cheap enough to re-read a
 * file that compaction keeps small). A bad line is skipped without a word.
 */
export function droppedIds(text: string): string[] {
  const ids: string[] = [];
  for (const line of text.split("\n")) {
    if (!line.includes('"dropped"')) continue;
    try {
      const parsed = Dropped.safeParse(JSON.parse(line));
      if (parsed.success) ids.push(parsed.data.id);
    } catch {
      // A torn or hand-edited line: reported by the next open, not here.
    }
  }
  return ids;
}
