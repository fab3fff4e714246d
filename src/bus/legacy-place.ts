/**
 * Files written before the reply place was typed (journal lines, jobs.json payloads, pending
 * approvals) kept the thread and the interaction in the untyped `metadata`, each platform under
 * its own key: Telegram `threadId` (a number), Slack `threadTs`, Discord `threadId` and
 * `interactionId`. Their readers lift them into the typed fields, so what an older version wrote
 * still replies into the right thread. Pure.
 */
import type { ReplyPlace } from "./types.js";

/** The reply place an old `metadata` record names; empty when it names none. */
export function legacyReplyPlace(metadata: unknown): ReplyPlace {
  if (metadata === null || typeof metadata !== "object" || Array.isArray(metadata)) return {};
  const { threadId, threadTs, interactionId } = metadata as Record<string, unknown>;
  const thread =
    typeof threadTs === "string" && threadTs !== ""
      ? threadTs
      : typeof threadId === "number" && Number.isInteger(threadId)
        ? String(threadId)
        : typeof threadId === "string" && threadId !== ""
          ? threadId
          : undefined;
  return {
    ...(thread !== undefined ? { threadId: thread } : {}),
    ...(typeof interactionId === "string" && interactionId !== "" ? { interactionId } : {}),
  };
}

/** `x` with the typed fields it lacks filled in from its old `metadata` (typed fields win). */
export function withLegacyPlace<T extends ReplyPlace & { metadata?: Record<string, unknown> | undefined }>(
  x: T,
): T {
  const legacy = legacyReplyPlace(x.metadata);
  const threadId = x.threadId ?? legacy.threadId;
  const interactionId = x.interactionId ?? legacy.interactionId;
  if (threadId === x.threadId && interactionId === x.interactionId) return x;
  return {
    ...x,
    ...(threadId !== undefined ? { threadId } : {}),
    ...(interactionId !== undefined ? { interactionId } : {}),
  };
}
