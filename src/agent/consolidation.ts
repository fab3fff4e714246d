/**
 * Memory consolidation (nanobot's MemoryStore.consolidate): when a session's
 * unconsolidated tail reaches the memory window (messages) or its share of the
 * model's context window (tokens, tokenConsolidationRange), its older part is sent to
 * the model with a private `save_memory` tool; the model answers with a
 * HISTORY.md paragraph and the whole updated MEMORY.md. Only after both files
 * are written does the session's lastConsolidated move, so a failure at any
 * point loses nothing: the same messages are simply offered again later.
 */
import { settleWithin } from "../util/timeout.js";
import * as z from "zod";
import { logger, type Logger } from "../log.js";
import type { ChatMessage, ChatResponse, Provider, ToolDefinition } from "../llm/types.js";
import type { Session } from "../sessions/session.js";
import type { SessionStorage } from "../sessions/storage.js";
import { PalaverError, errorMessage } from "../util/errors.js";
import type { MemoryArchiver } from "./extensions.js";
import { readPromptPart, DEFAULT_PROMPT_FILE_MAX_CHARS, type PromptPart } from "../util/prompt-file.js";
import type { ContextBudget } from "./budget/budget.js";
import { takeChunk, type Chunk } from "./consolidation-fit.js";
import type { MemoryFiles } from "./memory.js";

export const CONSOLIDATION_SYSTEM_PROMPT =
  "You are a memory consolidation agent. Call the save_memory tool with your consolidation of the conversation.";

/** Private to this module: never registered in the agent's ToolRegistry. */
export const SAVE_MEMORY_TOOL: ToolDefinition = {
  type: "function",
  function: {
    name: "save_memory",
    description: "Save the memory consolidation result to persistent storage.",
    parameters: {
      type: "object",
      properties: {
        history_entry: {
          type: "string",
          description:
            "A paragraph (2-5 sentences) summarizing the key events/decisions/topics. " +
            "Start with a timestamp like [YYYY-MM-DD HH:MM]. Include details useful for grep search.",
        },
        memory_update: {
          type: "string",
          description:
            "The full updated long-term memory as markdown. Include all existing facts plus new ones. " +
            "Return unchanged if nothing new.",
        },
      },
      required: ["history_entry", "memory_update"],
    },
  },
};

export const SaveMemoryArgsSchema = z.object({
  history_entry: z.string().trim().min(1, "history_entry is empty"),
  memory_update: z.string(),
});
export type SaveMemoryArgs = z.infer<typeof SaveMemoryArgsSchema>;

/** Default wait before retrying a session whose consolidation failed. */
export const DEFAULT_FAILURE_COOLDOWN_MS = 60_000;
/** How many running consolidations archiveAll waits out before giving up (each is bounded by the LLM timeout). */
const MAX_WAITS = 5;

function contentText(content: ChatMessage["content"]): string {
  if (content === null || content === undefined) return "";
  if (typeof content === "string") return content;
  return content
    .filter((p) => p.type === "text")
    .map((p) => p.text)
    .join("\n");
}

/**
 * One line per message that has text: `[YYYY-MM-DD HH:MM] ROLE [tools: a, b]: content`.
 * The stamp is the first 16 characters of the message's timestamp with the
 * ISO 'T' made a space (nanobot keeps the 'T'; the space matches the stamp the
 * model is asked to start its history entry with), '?' when there is none.
 */
export function formatForConsolidation(messages: readonly ChatMessage[]): string {
  const lines: string[] = [];
  for (const msg of messages) {
    const line = consolidationLine(msg);
    if (line !== null) lines.push(line);
  }
  return lines.join("\n");
}

/** One message's line (see formatForConsolidation), null when it has no text. */
function consolidationLine(msg: ChatMessage): string | null {
  const text = contentText(msg.content);
  if (text === "") return null;
  const stamp = msg.timestamp ? msg.timestamp.slice(0, 16).replace("T", " ") : "?";
  const tools = msg.tools_used?.length ? ` [tools: ${msg.tools_used.join(", ")}]` : "";
  return `[${stamp}] ${msg.role.toUpperCase()}${tools}: ${text}`;
}

/** The user message of the consolidation request (nanobot's wording). */
export function consolidationPrompt(currentMemory: string, messages: readonly ChatMessage[]): string {
  return consolidationRequestText(currentMemory, formatForConsolidation(messages), false);
}

/** Told to the model when MEMORY.md is over the prompt cap (its rewrite would lose the rest). */
export const MEMORY_CUT_NOTE =
  "[MEMORY.md is longer than shown here, so it is kept as it is this time: memory_update is ignored; " +
  "put every new fact worth keeping into history_entry.]";

/** The request's user message around an already formatted conversation; `memoryCut`: only a part of MEMORY.md is shown. */
function consolidationRequestText(memory: string, conversation: string, memoryCut: boolean): string {
  const shown = memoryCut ? `${memory}\n\n${MEMORY_CUT_NOTE}` : memory || "(empty)";
  return (
    "Process this conversation and call the save_memory tool with your consolidation.\n\n" +
    `## Current Long-term Memory\n${shown}\n\n` +
    `## Conversation to Process\n${conversation}`
  );
}

/**
 * The messages [start, end) a background consolidation would take, or null
 * when the unconsolidated part has not reached the window. The newest
 * floor(window / 2) messages stay unconsolidated so the next turn keeps context.
 */
export function consolidationRange(
  length: number,
  lastConsolidated: number,
  memoryWindow: number,
): { start: number; end: number } | null {
  const start = Math.min(Math.max(0, Math.floor(lastConsolidated) || 0), length);
  if (!(memoryWindow > 0) || length - start < memoryWindow) return null;
  const end = length - Math.floor(memoryWindow / 2);
  return end > start ? { start, end } : null;
}

/** When the token count of the unconsolidated history triggers a consolidation. */
export interface TokenTrigger {
  /** Tokens of one stored message (the context budget's counter). */
  count: (msg: ChatMessage) => number;
  /** Unconsolidated tokens past this start a consolidation (consolidationRatio of the window). */
  threshold: number;
}

/**
 * The messages [start, end) to consolidate when the unconsolidated history
 * holds more than `threshold` tokens, or null. About the newest half of the
 * threshold stays unconsolidated, and the rest starts at a user message, so
 * the next prompt opens on a whole turn. The chunk is at most `threshold`
 * tokens, so the consolidation call itself fits the window.
 */
export function tokenConsolidationRange(
  messages: readonly ChatMessage[],
  lastConsolidated: number,
  { count, threshold }: TokenTrigger,
): { start: number; end: number } | null {
  const start = Math.min(Math.max(0, Math.floor(lastConsolidated) || 0), messages.length);
  let total = 0;
  for (let i = start; i < messages.length; i++) total += count(messages[i]!);
  if (!(threshold > 0) || total <= threshold) return null;
  let cut = start;
  let chunk = 0;
  while (cut < messages.length && total - chunk > threshold / 2 && chunk < threshold) {
    chunk += count(messages[cut]!);
    cut++;
  }
  // The kept part starts at a user message: back to the one at or before the cut, else on to the next.
  let end = cut;
  while (end > start && messages[end]?.role !== "user") end--;
  if (end <= start) {
    end = cut;
    while (end < messages.length && messages[end]!.role !== "user") end++;
  }
  return end > start && end < messages.length ? { start, end } : null;
}

/** The save_memory call of a reply, validated; a plain-text reason when there is none usable. */
export function parseSaveMemory(
  response: ChatResponse,
): { ok: true; args: SaveMemoryArgs } | { ok: false; reason: string } {
  const call = response.toolCalls.find((c) => c.name === SAVE_MEMORY_TOOL.function.name);
  if (!call) {
    const other = response.toolCalls.map((c) => c.name).join(", ");
    return {
      ok: false,
      reason: other
        ? `the model called ${other} instead of save_memory`
        : "the model did not call save_memory",
    };
  }
  if (call.argumentsError) return { ok: false, reason: call.argumentsError };
  const parsed = SaveMemoryArgsSchema.safeParse(call.arguments);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const where = issue?.path.join(".") ?? "";
    return {
      ok: false,
      reason: `save_memory had invalid arguments (${where ? `${where}: ` : ""}${issue?.message ?? "invalid"})`,
    };
  }
  return { ok: true, args: parsed.data };
}

export interface MemoryConsolidatorOptions {
  provider: Provider;
  memory: MemoryFiles;
  sessions: SessionStorage;
  /** agents.defaults.memoryWindow: unconsolidated messages that trigger a consolidation. */
  memoryWindow: number;
  log?: Logger;
  now?: () => Date;
  /** After a failed background consolidation the session is left alone this long. */
  failureCooldownMs?: number;
  /** Consolidate by tokens too (the context budget), whichever of the two bounds is passed first. */
  tokens?: TokenTrigger;
  /**
   * The agent's context budget: each request is fitted to it (the history in chunks, one request
   * after the other). Without it the whole range goes in one request.
   */
  budget?: ContextBudget;
  /** agents.defaults.promptFileMaxChars: the most of MEMORY.md a request shows, as in the chat prompt. */
  memoryMaxChars?: number;
  /**
   * Runs a consolidation's read-ask-write of MEMORY.md alone (cluster mode: one instance at a time,
   * the workspace being shared); absent: consolidations of different chats may overlap.
   */
  exclusive?: <T>(work: () => Promise<T>) => Promise<T>;
}

/** MEMORY.md as a request shows it. */
type PromptMemory = Pick<PromptPart, "text" | "truncated">;

/** Tokens kept free in each request: token counts of parts do not add up exactly to the whole. */
const SAFETY_TOKENS = 64;
/** Below this much room for the conversation, a request is pointless: the budget is too small. */
const MIN_ROOM_TOKENS = 256;

interface Running {
  /** Never rejects: what waiters and drain() await. */
  settled: Promise<void>;
  abort: AbortController;
}

export class MemoryConsolidator implements MemoryArchiver {
  private readonly provider: Provider;
  private readonly memory: MemoryFiles;
  private readonly sessions: SessionStorage;
  private readonly memoryWindow: number;
  private readonly log: Logger;
  private readonly now: () => Date;
  private readonly cooldownMs: number;
  private readonly tokens: TokenTrigger | undefined;
  private readonly budget: ContextBudget | undefined;
  private readonly memoryMaxChars: number;
  private readonly exclusive: <T>(work: () => Promise<T>) => Promise<T>;
  /** Whether the oversized MEMORY.md was reported (once per consolidator, that is per agent). */
  private oversizeReported = false;
  /** At most one consolidation per session key, background or archiveAll. */
  private readonly running = new Map<string, Running>();
  /** When each session's last background consolidation failed (cleared on success). */
  private readonly failedAt = new Map<string, number>();

  constructor(opts: MemoryConsolidatorOptions) {
    this.provider = opts.provider;
    this.memory = opts.memory;
    this.sessions = opts.sessions;
    this.memoryWindow = opts.memoryWindow;
    this.log = opts.log ?? logger("memory");
    this.now = opts.now ?? (() => new Date());
    this.cooldownMs = opts.failureCooldownMs ?? DEFAULT_FAILURE_COOLDOWN_MS;
    this.tokens = opts.tokens;
    this.budget = opts.budget;
    this.exclusive = opts.exclusive ?? ((work) => work());
    this.memoryMaxChars = opts.memoryMaxChars ?? DEFAULT_PROMPT_FILE_MAX_CHARS;
  }

  /** Whether a consolidation of this session is running (for /status and tests). */
  isRunning(sessionKey: string): boolean {
    return this.running.has(sessionKey);
  }

  maybeConsolidate(session: Session): void {
    const key = session.key;
    if (this.running.has(key)) return;
    const failed = this.failedAt.get(key);
    if (failed !== undefined && this.now().getTime() - failed < this.cooldownMs) return;
    // Positions in session.messages (the forgotten messages are all consolidated).
    const done = session.consolidatedInMemory;
    const byCount = consolidationRange(session.messages.length, done, this.memoryWindow);
    const byTokens = this.tokens && tokenConsolidationRange(session.messages, done, this.tokens);
    // Both start at lastConsolidated: the one that takes more wins.
    const range =
      byCount && byTokens ? (byTokens.end > byCount.end ? byTokens : byCount) : (byCount ?? byTokens);
    if (!range) return;
    if (range === byTokens) {
      this.log.info(
        { session: key, start: range.start, end: range.end },
        "history past its token share; consolidating",
      );
    }
    const task = this.track(key, (signal) => this.consolidate(session, range.start, range.end, signal));
    // The failure is logged and remembered here; the caller never waits for or sees it.
    void task.then(
      () => this.failedAt.delete(key),
      (err: unknown) => {
        this.failedAt.set(key, this.now().getTime());
        this.log.warn(
          { session: key, err },
          `memory consolidation failed, will retry later: ${errorMessage(err)}`,
        );
      },
    );
  }

  async archiveAll(session: Session): Promise<void> {
    const key = session.key;
    for (let i = 0; i < MAX_WAITS; i++) {
      const current = this.running.get(key);
      if (!current) break;
      await current.settled;
    }
    if (this.running.has(key)) {
      throw new PalaverError("Memory archival failed: another consolidation of this chat is still running.");
    }
    const start = session.consolidatedInMemory;
    const end = session.messages.length;
    if (end <= start) return;
    try {
      await this.track(key, (signal) => this.consolidate(session, start, end, signal));
    } catch (err) {
      throw new PalaverError(`Memory archival failed: ${errorMessage(err)}`, { cause: err });
    }
    this.failedAt.delete(key);
  }

  async drain(timeoutMs: number): Promise<void> {
    const pending = [...this.running.values()];
    if (pending.length === 0) return;
    const settled = await settleWithin(Promise.all(pending.map((r) => r.settled)), Math.max(0, timeoutMs));
    if (!settled) {
      // Shutting down: stop the LLM calls still out. Nothing was written for
      // them, so their messages are offered again on the next start.
      const left = pending.filter((r) => !r.abort.signal.aborted);
      for (const r of left) r.abort.abort();
      this.log.warn({ running: left.length }, "memory consolidation still running at shutdown; cancelled");
    }
  }

  // ---- internals ----

  /** Registers the task under the session key until it settles; returns it (it may reject). */
  private track(key: string, run: (signal: AbortSignal) => Promise<void>): Promise<void> {
    const abort = new AbortController();
    const task = run(abort.signal);
    const entry: Running = {
      abort,
      settled: task.then(
        () => undefined,
        () => undefined,
      ),
    };
    this.running.set(key, entry);
    void entry.settled.then(() => {
      if (this.running.get(key) === entry) this.running.delete(key);
    });
    return task;
  }

  /**
   * Consolidates session.messages [start, end), in as many requests as the budget
   * needs, one after the other: each moves the session's pointer past its
   * chunk only once MEMORY.md and HISTORY.md are written, so a failure keeps
   * what earlier chunks saved and offers the rest again later. The bounds are
   * fixed up front: messages appended meanwhile lie beyond `end`.
   */
  private async consolidate(
    session: Session,
    start: number,
    end: number,
    signal: AbortSignal,
  ): Promise<void> {
    // Let the caller return before any work (and any synchronous throw) happens.
    await Promise.resolve();
    const messages = session.messages;
    /** What the positions in `messages` count from: session.lastConsolidated counts the forgotten messages too. */
    const base = session.forgotten;
    this.log.debug({ session: session.key, start, end }, "consolidating memory");
    // Bounded: every round consolidates at least one message, or stops.
    for (let at = start; at < end;) {
      const { moved, chunk } = await this.exclusive(async () => {
        const memory = await this.promptMemory();
        const chunk = await this.nextChunk(messages, at, end, memory);
        const moved = await this.consolidateChunk(
          session,
          messages,
          base + at,
          base + chunk.next,
          chunk,
          memory,
          signal,
        );
        return { moved, chunk };
      });
      if (!moved) return;
      at = chunk.next;
    }
    // What is consolidated is never sent to the model again: memory keeps only what turns need.
    if (session.messages === messages) session.forgetConsolidated();
  }

  /** MEMORY.md capped as in the chat prompt; an oversized one is reported once, with what to do. */
  private async promptMemory(): Promise<PromptMemory> {
    const part = await readPromptPart(this.memory.paths.memory, this.memoryMaxChars);
    if (!part) return { text: "", truncated: false };
    if (part.truncated && !this.oversizeReported) {
      this.oversizeReported = true;
      this.log.warn(
        { bytes: part.bytes, maxChars: this.memoryMaxChars },
        `memory/MEMORY.md is ${Math.ceil(part.bytes / 1024)} KB (${part.total}), over the ` +
          `${this.memoryMaxChars} characters that fit a prompt (agents.defaults.promptFileMaxChars): the ` +
          "model sees only its first part, and consolidation leaves the file as it is (new facts go to " +
          "memory/HISTORY.md) so nothing past the cut is lost. Trim it by hand.",
      );
    }
    return { text: part.text, truncated: part.truncated };
  }

  /** The next messages from `at` whose request fits the budget (all of them without a budget). */
  private async nextChunk(
    messages: readonly ChatMessage[],
    at: number,
    end: number,
    memory: PromptMemory,
  ): Promise<Chunk> {
    const budget = this.budget;
    if (!budget) return takeChunk(messages, at, end, Infinity, consolidationLine, () => 0);
    const limit = budget.settings.budgetTokens;
    const request: ChatMessage[] = [
      { role: "system", content: CONSOLIDATION_SYSTEM_PROMPT },
      { role: "user", content: consolidationRequestText(memory.text, "", memory.truncated) },
    ];
    const take = (): { chunk: Chunk; fixed: number } => {
      const fixed = budget.counter.prompt(request, [SAVE_MEMORY_TOOL]);
      const room = limit - fixed - SAFETY_TOKENS;
      if (room < MIN_ROOM_TOKENS) {
        throw new PalaverError(
          `the context budget (${limit} tokens) leaves no room for the conversation beside MEMORY.md and ` +
            `the consolidation prompt (${fixed} tokens): lower agents.defaults.promptFileMaxChars or give ` +
            "the model a larger context window (agents.defaults.contextWindowTokens)",
        );
      }
      return {
        chunk: takeChunk(messages, at, end, room, consolidationLine, (t) => budget.counter.text(t)),
        fixed,
      };
    };
    const first = take();
    // Counted with the model's own tokenizer once a request comes near the limit, as the chat's calls are.
    return (await budget.preciseFor(first.fixed + first.chunk.tokens)) ? take().chunk : first.chunk;
  }

  /**
   * One request for the chunk; true when the session's pointer moved from `from` past it, to `next`.
   * `messages` is the session's array when the consolidation began.
   */
  private async consolidateChunk(
    session: Session,
    messages: readonly ChatMessage[],
    from: number,
    next: number,
    chunk: Chunk,
    memory: PromptMemory,
    signal: AbortSignal,
  ): Promise<boolean> {
    const response = await this.provider.chat(
      {
        messages: [
          { role: "system", content: CONSOLIDATION_SYSTEM_PROMPT },
          { role: "user", content: consolidationRequestText(memory.text, chunk.text, memory.truncated) },
        ],
        tools: [SAVE_MEMORY_TOOL],
      },
      signal,
    );
    const result = parseSaveMemory(response);
    if (!result.ok) throw new PalaverError(result.reason);
    const { history_entry, memory_update } = result.args;

    // MEMORY.md first: rewriting it again on a retry is harmless, a second
    // HISTORY.md paragraph would not be. A MEMORY.md the model saw only in part
    // is never rewritten: its rewrite would drop everything past the cut.
    if (memory.truncated) {
      this.log.debug({ session: session.key }, "MEMORY.md over the prompt cap: memory_update not applied");
    } else if (memory_update.trim() !== "" && memory_update.trim() !== memory.text) {
      await this.memory.writeMemory(memory_update);
    }
    // appendHistory keeps a leading [YYYY-MM-DD HH:MM] the model wrote and stamps the entry otherwise.
    await this.memory.appendHistory(history_entry, this.now());

    // Last: only now is it safe to treat [from, next) as consolidated.
    if (session.messages !== messages || session.lastConsolidated !== from) {
      // Cleared or moved by someone else meanwhile: our range no longer means the same messages.
      this.log.warn({ session: session.key }, "session changed during consolidation; not moving its pointer");
      return false;
    }
    session.lastConsolidated = next;
    await this.sessions.saveMetadata(session);
    this.log.info({ session: session.key, messages: next - from }, "memory consolidated");
    return true;
  }
}
