/**
 * Memory search's vectors (memory.search.embeddings): pieces are embedded in the background, a
 * batch at a time, after they are indexed (so a reply never waits on the endpoint), and a query is
 * embedded when it is searched. When the endpoint fails, search ranks by full text alone: the log
 * says so once per failure streak, the state is kept in the index (`palaver status` and `palaver
 * memory status` read it from another process), and the background work tries again with backoff
 * until a call succeeds.
 */
import type { Embedder } from "../llm/embeddings.js";
import type { Logger } from "../log.js";
import { backoffDelay } from "../util/backoff.js";
import { errorMessage } from "../util/errors.js";
import { deadlineSignal } from "../util/timeout.js";
import type { RecallIndex } from "./index-db.js";

/** Pieces per request: well under every provider's input limit (OpenAI: 2,048). */
const BATCH = 64;
/** A piece is embedded by its beginning: embedding models read a few thousand tokens at most. */
const MAX_EMBEDDED_CHARS = 6_000;
/** One batch's wait for the endpoint. */
const BATCH_TIMEOUT_MS = 60_000;
/** A query's wait: a search must answer soon, by full text when the vector is late. */
const QUERY_TIMEOUT_MS = 10_000;
const RETRY_BASE_MS = 5_000;
const RETRY_MAX_MS = 10 * 60_000;

/** Where the failure streak is kept in the index's meta table (JSON `EmbeddingFailure`). */
export const FAILING_KEY = "embeddings.failing";

export interface EmbeddingFailure {
  model: string;
  since: string;
  reason: string;
}

export type EmbeddingsState =
  { state: "off" } | { state: "on"; model: string; embedded: number; failing?: EmbeddingFailure };

export class Embeddings {
  /** The id after which pieces have not been looked at for vectors. */
  private highWater = 0;
  private running: Promise<void> | undefined;
  private again = false;
  private failures = 0;
  private retryTimer: NodeJS.Timeout | undefined;
  private readonly closing = new AbortController();

  constructor(
    private readonly embedder: Embedder,
    private readonly index: () => RecallIndex | undefined,
    private readonly log: Logger,
  ) {}

  get model(): string {
    return this.embedder.model;
  }

  /** Called once the index is open: vectors of another model are dropped, the failure streak read back. */
  opened(index: RecallIndex): void {
    const dropped = index.dropVectorsNotOf(this.embedder.model);
    if (dropped > 0)
      this.log.info(
        { model: this.embedder.model, dropped },
        "memory search: the embedding model changed; every piece is embedded again in the background",
      );
    if (this.failingNow(index)) this.failures = 1;
    this.highWater = 0;
  }

  /** Embeds what has no vector yet, in the background; a call while it runs makes it look again after. */
  fill(): void {
    if (this.closing.signal.aborted) return;
    if (this.running) {
      this.again = true;
      return;
    }
    this.running = this.fillAll().finally(() => {
      this.running = undefined;
      if (this.again && this.failures === 0) {
        this.again = false;
        this.fill();
      }
    });
  }

  /** A query's vector, or undefined (search by full text) while the endpoint fails or when it fails now. */
  async queryVector(query: string): Promise<number[] | undefined> {
    if (this.failures > 0) return undefined;
    const deadline = deadlineSignal(QUERY_TIMEOUT_MS, this.closing.signal);
    try {
      const [vector] = await this.embedder.embed([query], deadline.signal);
      return vector;
    } catch (err) {
      if (this.closing.signal.aborted) return undefined;
      this.failed(err);
      return undefined;
    } finally {
      deadline.dispose();
    }
  }

  state(index: RecallIndex): EmbeddingsState {
    const failing = this.failingNow(index);
    return {
      state: "on",
      model: this.embedder.model,
      embedded: index.vectorCount(this.embedder.model),
      ...(failing ? { failing } : {}),
    };
  }

  /** Stops the background work; a batch on the wire is abandoned (its pieces are embedded next start). */
  async close(): Promise<void> {
    this.closing.abort();
    clearTimeout(this.retryTimer);
    await this.running;
  }

  private async fillAll(): Promise<void> {
    let called = false;
    for (;;) {
      const index = this.index();
      if (!index || this.closing.signal.aborted) return;
      const batch = index.unembedded(this.highWater, BATCH);
      // A retry with nothing to embed still asks the endpoint, so that it is known to work again.
      if (batch.length === 0 && (called || this.failures === 0)) return;
      const texts = batch.length ? batch.map((b) => b.text.slice(0, MAX_EMBEDDED_CHARS)) : ["ping"];
      const deadline = deadlineSignal(BATCH_TIMEOUT_MS, this.closing.signal);
      try {
        const vectors = await this.embedder.embed(texts, deadline.signal);
        called = true;
        if (this.closing.signal.aborted) return;
        this.index()?.putVectors(
          this.embedder.model,
          batch.map((b, i) => ({ id: b.id, vector: vectors[i]! })),
        );
        if (batch.length) this.highWater = batch.at(-1)!.id;
        this.recovered();
      } catch (err) {
        if (this.closing.signal.aborted) return;
        this.failed(err);
        return;
      } finally {
        deadline.dispose();
      }
    }
  }

  private failed(err: unknown): void {
    const reason = errorMessage(err);
    if (this.failures === 0) {
      this.log.warn(
        { model: this.embedder.model, reason },
        `memory search: embeddings with ${this.embedder.model} fail (${reason}); searching by full text ` +
          "(BM25) only until they work again",
      );
      this.persist({ model: this.embedder.model, since: new Date().toISOString(), reason });
    }
    this.failures++;
    clearTimeout(this.retryTimer);
    this.retryTimer = setTimeout(
      () => this.fill(),
      backoffDelay(this.failures - 1, RETRY_BASE_MS, RETRY_MAX_MS),
    );
    this.retryTimer.unref();
  }

  private recovered(): void {
    if (this.failures === 0) return;
    this.failures = 0;
    this.persist(undefined);
    this.log.info(
      { model: this.embedder.model },
      "memory search: embeddings work again; ranking by meaning and words",
    );
  }

  private persist(failure: EmbeddingFailure | undefined): void {
    try {
      this.index()?.setMeta(FAILING_KEY, failure ? JSON.stringify(failure) : undefined);
    } catch (err) {
      this.log.warn({ err }, "memory search: could not record the embeddings' state in the index");
    }
  }

  private failingNow(index: RecallIndex): EmbeddingFailure | undefined {
    return readFailure(index.getMeta(FAILING_KEY), this.embedder.model);
  }
}

/** The failure streak recorded in the index for `model` (another model's is stale), or undefined. */
export function readFailure(raw: string | undefined, model: string): EmbeddingFailure | undefined {
  if (!raw) return undefined;
  try {
    const f = JSON.parse(raw) as Partial<EmbeddingFailure>;
    return f.model === model && typeof f.since === "string" && typeof f.reason === "string"
      ? { model, since: f.since, reason: f.reason }
      : undefined;
  } catch {
    return undefined;
  }
}
