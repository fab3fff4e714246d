/**
 * The live previews of the turns whose replies are being written, by turn id (channels/live-preview.ts
 * draws each one). A preview is taken off when its turn's final or progress message is on its way to
 * replace it, and a turn that ended lately is remembered, so a delta still on its way starts nothing.
 */
import { randomUUID } from "node:crypto";
import type { Journal } from "../daemon/journal.js";
import { BoundedMap } from "../util/bounded-map.js";
import { LivePreview } from "./live-preview.js";
import type { PreviewSurface } from "./types.js";

/** Where a turn's preview is shown. */
export interface PreviewPlace {
  turnId: string;
  channel: string;
  chatId: string;
  threadId?: string | undefined;
  metadata?: Record<string, unknown> | undefined;
}

/**
 * A live preview on `surface`, journaled while it is on screen (where, never what), so a crash
 * mid-stream can be repaired at the next start (interrupted-previews.ts).
 */
export function journaledPreview(
  surface: PreviewSurface,
  intervalMs: number,
  place: PreviewPlace,
  journal: Pick<Journal, "recordPreview" | "closePreview"> | undefined,
): LivePreview {
  if (!journal) return new LivePreview(surface, { intervalMs });
  const id = randomUUID();
  const { threadId, metadata, ...where } = place;
  return new LivePreview(surface, {
    intervalMs,
    onPosted: (refs) =>
      journal.recordPreview({
        id,
        ...where,
        ...(threadId !== undefined ? { threadId } : {}),
        ...(metadata ? { metadata } : {}),
        refs: [...refs],
      }),
    onEnded: () => journal.closePreview(id),
  });
}

export class TurnPreviews {
  private readonly open = new Map<string, LivePreview>();
  private readonly ended = new BoundedMap<string, true>(1000);

  /** The turn's preview; made by `make` on its first delta (undefined: this chat shows none). */
  forDelta(turnId: string, make: () => LivePreview | undefined): LivePreview | undefined {
    if (this.ended.has(turnId)) return undefined;
    let preview = this.open.get(turnId);
    if (!preview) {
      preview = make();
      if (preview) this.open.set(turnId, preview);
    }
    return preview;
  }

  /**
   * Takes the turn's preview off for the message that replaces it. Deltas after this belong to a
   * new preview (the model writing again after tool calls). A message with files goes out whole:
   * its preview is closed as it stands and none is returned.
   */
  take(turnId: string | undefined, withFiles: boolean): LivePreview | undefined {
    const preview = turnId ? this.open.get(turnId) : undefined;
    if (!preview) return undefined;
    this.open.delete(turnId!);
    if (!withFiles) return preview;
    void preview.close();
    return undefined;
  }

  /** The turn ended: its preview if one is still open (stopped, or no final), taken off. */
  end(turnId: string): LivePreview | undefined {
    this.ended.set(turnId, true);
    const preview = this.open.get(turnId);
    this.open.delete(turnId);
    return preview;
  }
}
