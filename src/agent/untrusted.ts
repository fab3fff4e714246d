/**
 * A turn's untrusted reads carried across to the turn that continues its work: a subagent spawned
 * from a marked turn starts marked, and its report (a system message) marks the turn that reads
 * it, since the report may repeat what the untrusted content said.
 */
import { SYSTEM_CHANNEL, type InboundMessage } from "../bus/types.js";
import type { UntrustedRead } from "./tools/types.js";

/** The metadata key of a system message that carries its sender's untrusted reads. */
const KEY = "untrusted";

/** Metadata for a report from a turn that read `reads` (nothing when it read none). */
export function untrustedMetadata(reads: readonly UntrustedRead[] | undefined): Record<string, unknown> {
  return reads?.length ? { [KEY]: reads.map(({ tool, source }) => ({ tool, source })) } : {};
}

/** The untrusted reads a system message reports, to start its turn marked (empty for any other message). */
export function reportedUntrusted(msg: InboundMessage): UntrustedRead[] {
  // Only palaver's own background work sets it; a chat message's metadata comes from a platform.
  if (msg.channel !== SYSTEM_CHANNEL) return [];
  const value = msg.metadata?.[KEY];
  if (!Array.isArray(value)) return [];
  return value.filter(
    (r): r is UntrustedRead =>
      typeof r === "object" &&
      r !== null &&
      typeof (r as UntrustedRead).tool === "string" &&
      typeof (r as UntrustedRead).source === "string",
  );
}
