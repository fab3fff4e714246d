/**
 * The fitting: a prompt made to fit a token budget, pure and deterministic.
 * Applied to a copy of the messages right before each model call (the stored
 * session is never touched), in this order, stopping as soon as it fits:
 *
 *   a. tool results older than the newest KEEP_TOOL_RESULTS are replaced by a
 *      stub (and their calls' large arguments shrunk);
 *   b. the oldest whole user turns are dropped (a tool call always goes with
 *      its results, so neither is ever left alone);
 *   c. the largest message still there is cut, with a notice.
 *
 * Steps a and b work in chunks aligned to the start of the prompt (results by
 * their ordinal, turns by theirs), not one message at a time: as a chat grows,
 * the cleared part then moves only every few turns, and in between the prompt
 * only grows at its end, so its prefix stays byte-identical and a provider's
 * prompt cache keeps hitting.
 */
import type { ChatMessage } from "../../llm/types.js";
import { stubArguments, stubResult, worthStubbing } from "./stubs.js";

/** The newest tool results always sent whole. */
export const KEEP_TOOL_RESULTS = 6;
/** Tool results are cleared this many at a time (by ordinal from the start of the prompt). */
export const STUB_CHUNK = 4;
/** User turns are dropped this many at a time (by ordinal from the start of the history). */
export const DROP_CHUNK = 8;

export interface FitInput {
  messages: readonly ChatMessage[];
  /** Tokens the prompt may use, tool definitions included. */
  budget: number;
  /** Tokens of one message (cached by the caller: this is called often). */
  count: (msg: ChatMessage) => number;
  /** Tokens sent with every call besides the messages (the tool definitions). */
  fixed?: number;
  /** Index of the first message of the current turn: never dropped (it may be cut). */
  keepFrom: number;
}

export interface FitResult {
  messages: ChatMessage[];
  /** Estimated tokens of the fitted prompt. */
  tokens: number;
  /** Estimated tokens before fitting. */
  tokensBefore: number;
  /** Tool results replaced by a stub. */
  stubbed: number;
  /** Messages left out with the oldest turns. */
  dropped: number;
  /** Whether one message had to be cut. */
  cut: boolean;
  /** False when even the cut prompt is over budget (a huge system prompt ...). */
  fits: boolean;
}

export function fitMessages(input: FitInput): FitResult {
  const { budget, count } = input;
  const messages = [...input.messages];
  let tokens = input.fixed ?? 0;
  for (const m of messages) tokens += count(m);
  const result: FitResult = {
    messages,
    tokens,
    tokensBefore: tokens,
    stubbed: 0,
    dropped: 0,
    cut: false,
    fits: tokens <= budget,
  };
  if (result.fits) return result;

  stubOldResults(result, input);
  if (result.tokens > budget) dropOldTurns(result, input);
  if (result.tokens > budget) cutLargest(result, input);
  result.fits = result.tokens <= budget;
  return result;
}

/** Step a: stub old tool results, a chunk at a time, oldest first. */
function stubOldResults(result: FitResult, { budget, count }: FitInput): void {
  const { messages } = result;
  const results: number[] = [];
  const callOf = new Map<
    string,
    { assistant: number; call: NonNullable<ChatMessage["tool_calls"]>[number] }
  >();
  messages.forEach((m, i) => {
    if (m.role === "tool") results.push(i);
    for (const call of m.tool_calls ?? []) callOf.set(call.id, { assistant: i, call });
  });
  const eligible = results.length - KEEP_TOOL_RESULTS;
  if (eligible <= 0) return;
  // Whole chunks first; the results of a chunk not yet complete one by one, only when that is not enough.
  const fullChunks = Math.floor(eligible / STUB_CHUNK) * STUB_CHUNK;
  const cleared = new Map<number, Set<string>>();
  for (let ordinal = 0; ordinal < eligible; ordinal++) {
    const boundary = ordinal < fullChunks ? ordinal % STUB_CHUNK === 0 : true;
    if (boundary && result.tokens <= budget) break;
    const index = results[ordinal]!;
    const msg = messages[index]!;
    if (!worthStubbing(msg)) continue;
    const origin = msg.tool_call_id === undefined ? undefined : callOf.get(msg.tool_call_id);
    const stub = stubResult(msg, origin?.call);
    result.tokens += count(stub) - count(msg);
    messages[index] = stub;
    result.stubbed++;
    if (origin) {
      const ids = cleared.get(origin.assistant) ?? new Set<string>();
      ids.add(origin.call.id);
      cleared.set(origin.assistant, ids);
    }
  }
  for (const [index, ids] of cleared) {
    const before = messages[index]!;
    const after = stubArguments(before, ids);
    if (after === before) continue;
    result.tokens += count(after) - count(before);
    messages[index] = after;
  }
}

/** Step b: drop the oldest user turns (a chunk at a time), never the current one. */
function dropOldTurns(result: FitResult, { budget, count, keepFrom }: FitInput): void {
  const { messages } = result;
  let head = 0;
  while (head < messages.length && messages[head]!.role === "system") head++;
  const end = Math.min(keepFrom, messages.length);
  // Turn starts: each user message between the leading system messages and the current turn.
  const starts: number[] = [];
  for (let i = head; i < end; i++) if (messages[i]!.role === "user" || i === head) starts.push(i);
  if (starts.length === 0) return;
  starts.push(end);
  const turns = starts.length - 1;
  const fullChunks = Math.floor(turns / DROP_CHUNK) * DROP_CHUNK;
  let dropTo = head;
  let saved = 0;
  for (let t = 0; t < turns; t++) {
    for (let i = starts[t]!; i < starts[t + 1]!; i++) saved += count(messages[i]!);
    dropTo = starts[t + 1]!;
    const boundary = t + 1 <= fullChunks ? (t + 1) % DROP_CHUNK === 0 : true;
    if (boundary && result.tokens - saved <= budget) break;
  }
  messages.splice(head, dropTo - head);
  result.tokens -= saved;
  result.dropped = dropTo - head;
}

/** Step c: cut the largest message with text still in the prompt so the whole fits. */
function cutLargest(result: FitResult, { budget, count }: FitInput): void {
  const { messages } = result;
  let largest = -1;
  let largestTokens = 0;
  messages.forEach((m, i) => {
    if (m.role === "system" || typeof m.content !== "string") return;
    const n = count(m);
    if (n > largestTokens) [largest, largestTokens] = [i, n];
  });
  if (largest < 0) return;
  const msg = messages[largest]!;
  const text = msg.content as string;
  const over = result.tokens - budget;
  // Characters in proportion to the tokens allowed, with a margin for uneven text.
  const allowed = Math.max(0, largestTokens - over);
  const keep = Math.max(0, Math.floor((text.length * allowed * 0.9) / largestTokens) - 120);
  const cut: ChatMessage = {
    ...msg,
    content:
      `${text.slice(0, keep)}\n\n[… cut to fit the model's context window: ` +
      `${keep} of ${text.length} characters kept …]`,
  };
  result.tokens += count(cut) - largestTokens;
  messages[largest] = cut;
  result.cut = true;
}
