/**
 * The runner: one turn of LLM ⇄ tools. It alternates model calls and tool
 * calls up to a bound, and returns the messages the turn produced. It never
 * touches the session or the bus itself: the loop decides what is saved and
 * delivered, so an aborted or failed turn leaves nothing half-written.
 */
import type { ChatMessage, ChatResponse, Provider, ToolCall, ToolDefinition } from "../llm/types.js";
import { answerForUser } from "../llm/cut-off.js";
import { LlmError } from "../util/errors.js";
import type { ContextBudget } from "./budget/budget.js";
import type { ToolRegistry } from "./tools/registry.js";
import type { ToolContext } from "./tools/types.js";
import { formatToolHint, truncateToolResult } from "./format.js";
import { runOnce, type TurnCallRecord } from "./tool-replay.js";
import { CONTINUE_REQUEST, finalAnswerRequest, stoppedText } from "./loop-rules.js";

/** The same call (name + arguments) this many times in one turn is refused. */
export const MAX_IDENTICAL_CALLS = 3;

export interface RunTurnOptions {
  provider: Provider;
  tools: ToolRegistry;
  /** The full prompt: system, history, runtime context, user message. */
  messages: ChatMessage[];
  maxIterations: number;
  toolResultMaxChars: number;
  ctx: ToolContext;
  /** Text the model says before calling tools. */
  onProgress?: (text: string) => void;
  /** A short description of the tool calls about to run, e.g. `read_file("notes.md")`. */
  onToolHint?: (hint: string) => void;
  /** Streams each model call: its visible text so far (see ChatRequest.onText). */
  onText?: (textSoFar: string) => void;
  /** The turn's recorded tool calls: a replay after a crash reuses their results (agent/tool-replay.ts). */
  replay?: TurnCallRecord;
  /**
   * Asked before a call runs (approvals/gate.ts): null lets it run; a string is its result instead
   * (a denial). Throws only on abort. Absent (tools.approval.mode "off"): every call runs.
   */
  approve?: ApproveCall;
  /**
   * Fits each call's prompt into the model's context window (agent/budget/): a copy is pruned,
   * `messages` and what the turn produces stay whole. Absent: sent as they are.
   */
  budget?: ContextBudget;
  /** How many trailing messages of `messages` are this turn's own (never left out); default 1. */
  turnMessages?: number;
  /**
   * The tool definitions of each call, asked before every call (tool tiers: a tool loaded during the
   * turn is sent from the next call on). Absent: all of `tools`.
   */
  definitions?: () => readonly ToolDefinition[];
  /** Told of each tool call before it runs (tool tiers: calling an unloaded tool loads it). */
  onCall?: (name: string) => void;
  /** Adds what each call must carry but the session must not keep (the plan reminder): a copy. */
  prepare?: (messages: readonly ChatMessage[]) => ChatMessage[];
  /** An answer cut off at the output token limit is continued this many times at most; default 0. */
  maxContinuations?: number;
}

/** The approval check of one tool call: null to run it, or the text the model gets instead. */
export type ApproveCall = (
  call: ToolCall,
  ctx: ToolContext,
  info: { readOnly: boolean },
) => Promise<string | null>;

export interface TurnResult {
  /** What to tell the user; null when the model ended without text. */
  content: string | null;
  /** Assistant and tool messages produced by the turn, in order, for the session. */
  messages: ChatMessage[];
  toolsUsed: string[];
  /** True when the turn stopped at maxIterations. */
  hitIterationLimit: boolean;
  /** Prompt tokens of the turn's last model call (the provider's count, else the budget's estimate). */
  promptTokens?: number;
}

export async function runTurn(opts: RunTurnOptions): Promise<TurnResult> {
  const { tools, ctx } = opts;
  const prompt = [...opts.messages];
  const produced: ChatMessage[] = [];
  const toolsUsed: string[] = [];
  const callCounts = new Map<string, number>();
  const definitionsNow = () => {
    const all = opts.definitions?.() ?? tools.definitions();
    return all.length ? all : undefined;
  };
  const keepFrom = Math.max(0, prompt.length - (opts.turnMessages ?? 1));
  let promptTokens: number | undefined;

  for (let iteration = 0; iteration < opts.maxIterations; iteration++) {
    ctx.signal.throwIfAborted();
    const definitions = definitionsNow();
    const call = await callModel(prompt, definitions, keepFrom, opts);
    const response = call.response;
    promptTokens = call.promptTokens;

    if (response.toolCalls.length === 0) {
      const answer = await continueCutOff(response, prompt, definitions, keepFrom, opts);
      produced.push(assistantMessage(answer.response));
      return {
        content: answerForUser(answer.response),
        messages: produced,
        toolsUsed,
        hitIterationLimit: false,
        ...((answer.promptTokens ?? promptTokens) !== undefined
          ? { promptTokens: answer.promptTokens ?? promptTokens }
          : {}),
      };
    }

    if (response.content?.trim()) opts.onProgress?.(response.content.trim());
    opts.onToolHint?.(response.toolCalls.map(formatToolHint).join(", "));

    const assistant = assistantMessage(response);
    prompt.push(assistant);
    produced.push(assistant);

    for (const batch of callBatches(response.toolCalls, tools)) {
      ctx.signal.throwIfAborted();
      toolsUsed.push(...batch.map((call) => call.name));
      for (const call of batch) opts.onCall?.(call.name);
      // One call at a time, except a run of parallel tools (delegate), which start together;
      // either way the results go back in the order the model made the calls.
      const results = await Promise.all(batch.map((call) => runCall(call, callCounts, opts)));
      batch.forEach((call, i) => {
        const toolMessage: ChatMessage = {
          role: "tool",
          tool_call_id: call.id,
          name: call.name,
          content: results[i]!,
        };
        prompt.push(toolMessage);
        produced.push(toolMessage);
      });
    }
  }

  // Out of tool steps: one last call without tools writes the answer from what was gathered.
  ctx.signal.throwIfAborted();
  const closing = [...prompt, finalAnswerRequest(opts.maxIterations)];
  const last = await callModel(closing, undefined, keepFrom, opts);
  const answer = await continueCutOff(last.response, closing, undefined, keepFrom, opts);
  promptTokens = answer.promptTokens ?? last.promptTokens;
  const written = answer.response.content?.trim() ? answerForUser(answer.response) : null;
  const content = written ?? stoppedText(opts.maxIterations, toolsUsed);
  produced.push(written ? assistantMessage(answer.response) : { role: "assistant", content });
  return {
    content,
    messages: produced,
    toolsUsed,
    hitIterationLimit: true,
    ...(promptTokens !== undefined ? { promptTokens } : {}),
  };
}

/**
 * An answer cut off at the output token limit (finish_reason "length") is continued: the model is
 * shown its part and asked to go on, up to maxContinuations times, and the parts are joined into
 * one answer. Still cut off after the last, the joined answer keeps its "length" finish reason, so
 * answerForUser marks it. Tool calls in a continuation are ignored: it was asked for text.
 */
async function continueCutOff(
  first: ChatResponse,
  prompt: readonly ChatMessage[],
  definitions: readonly ToolDefinition[] | undefined,
  keepFrom: number,
  opts: RunTurnOptions,
): Promise<{ response: ChatResponse; promptTokens?: number }> {
  let response = first;
  let text = first.content ?? "";
  let promptTokens: number | undefined;
  const conversation = [...prompt];
  for (let n = 0; n < (opts.maxContinuations ?? 0); n++) {
    if (response.finishReason !== "length" || !response.content?.trim()) break;
    opts.ctx.signal.throwIfAborted();
    conversation.push({ role: "assistant", content: response.content }, CONTINUE_REQUEST);
    const before = text;
    const onText = opts.onText;
    const call = await callModel(conversation, definitions, keepFrom, {
      ...opts,
      // The live preview shows the whole answer, not only the part being written.
      ...(onText ? { onText: (more: string) => onText(before + more) } : {}),
    });
    response = call.response;
    promptTokens = call.promptTokens;
    text += response.content ?? "";
  }
  return {
    response: { ...response, content: text || response.content, toolCalls: [] },
    ...(promptTokens !== undefined ? { promptTokens } : {}),
  };
}

/**
 * One model call with the prompt fitted to the budget. When the provider says
 * it is still too long (our count and the model's differ), the prompt is
 * fitted to half the budget and sent once more; a second refusal is thrown
 * (the chat is told plainly). Never more than two sends.
 */
async function callModel(
  turnPrompt: readonly ChatMessage[],
  definitions: readonly ToolDefinition[] | undefined,
  keepFrom: number,
  { provider, ctx, onText, budget, prepare }: RunTurnOptions,
): Promise<{ response: ChatResponse; promptTokens: number | undefined }> {
  const prompt = prepare ? prepare(turnPrompt) : turnPrompt;
  const send = async (messages: ChatMessage[], estimate?: number) => {
    const response = await provider.chat(
      { messages, tools: definitions, ...(onText ? { onText } : {}) },
      ctx.signal,
    );
    return { response, promptTokens: response.usage?.promptTokens || estimate };
  };
  if (!budget) return send([...prompt]);
  const fitted = await budget.fit(prompt, definitions, keepFrom);
  try {
    return await send(fitted.messages, fitted.tokens);
  } catch (err) {
    if (!(err instanceof LlmError) || err.kind !== "context_overflow") throw err;
    budget.overflowed(fitted.tokens, "retrying once with half the budget");
    const smaller = await budget.fit(prompt, definitions, keepFrom, 0.5);
    try {
      return await send(smaller.messages, smaller.tokens);
    } catch (again) {
      if (again instanceof LlmError && again.kind === "context_overflow") {
        budget.overflowed(smaller.tokens, "giving up: still too long at half the budget");
      }
      throw again;
    }
  }
}

async function runCall(
  call: ToolCall,
  callCounts: Map<string, number>,
  { tools, ctx, replay, toolResultMaxChars, approve }: RunTurnOptions,
): Promise<string> {
  const args = canonicalArguments(call);
  const key = `${call.name}\u0000${args}`;
  const count = (callCounts.get(key) ?? 0) + 1;
  callCounts.set(key, count);
  if (count >= MAX_IDENTICAL_CALLS) {
    return (
      `Error: refused. You already called ${call.name} with exactly these arguments ${count - 1} times ` +
      `in this turn; the result will not change. Use the results you have, try different arguments, ` +
      `or answer the user.`
    );
  }
  const policy = tools.replayPolicy(call.name);
  // A call that cannot run (no such tool, arguments that are not JSON) is not worth a question:
  // the registry answers it with an error.
  const gated = approve && tools.has(call.name) && !call.argumentsError;
  const check = gated ? () => approve(call, ctx, { readOnly: policy.readOnly }) : undefined;
  // What is recorded is what the model saw, so a replay gives it the very same text.
  const run = async () => {
    const result = await tools.execute(call, ctx);
    markIfUntrusted(call, ctx, tools);
    return truncateToolResult(result, toolResultMaxChars);
  };
  if (!replay || policy.readOnly) return (await check?.()) ?? run();
  // Through runOnce: a replayed turn reuses the recorded result (a denial too) and never asks twice.
  return runOnce({
    before: check,
    record: replay,
    key: { name: call.name, args, n: count },
    turn: ctx.turn,
    signal: ctx.signal,
    replayNote: policy.replayNote,
    run,
  });
}

/** The response's calls in running order: each alone, but consecutive parallel ones (Tool.parallel) together. */
function callBatches(calls: readonly ToolCall[], tools: ToolRegistry): ToolCall[][] {
  const batches: ToolCall[][] = [];
  for (const call of calls) {
    const last = batches.at(-1);
    const together = tools.runsInParallel(call.name);
    if (together && last && tools.runsInParallel(last[0]!.name)) last.push(call);
    else batches.push([call]);
  }
  return batches;
}

/**
 * Marks the turn once a tool whose output is untrusted has run (a fetched page, an MCP result): its
 * later outward calls are asked (approvals/outward.ts). A new array, so a recorded call's turn-state
 * change carries it and a replay that reuses the result marks the turn the same way.
 */
function markIfUntrusted(call: ToolCall, ctx: ToolContext, tools: ToolRegistry): void {
  const source = tools.untrustedSource(call, ctx);
  if (source !== null) ctx.turn.untrusted = [...(ctx.turn.untrusted ?? []), { tool: call.name, source }];
}

/** Arguments as canonical JSON (sorted keys) so key order does not hide a repeat. */
function canonicalArguments(call: ToolCall): string {
  if (call.argumentsError) return call.rawArguments;
  return JSON.stringify(call.arguments, (_key, value: unknown) =>
    value && typeof value === "object" && !Array.isArray(value)
      ? Object.fromEntries(Object.entries(value).sort(([a], [b]) => a.localeCompare(b)))
      : value,
  );
}

function assistantMessage(response: ChatResponse): ChatMessage {
  const message: ChatMessage = { role: "assistant", content: response.content };
  if (response.toolCalls.length) {
    message.tool_calls = response.toolCalls.map((call) => ({
      id: call.id,
      type: "function" as const,
      function: { name: call.name, arguments: call.rawArguments },
    }));
  }
  if (response.reasoning) message.reasoning_content = response.reasoning;
  // Kept in the session file with the message (nanobot ignores the key; never sent to the model).
  if (response.usage)
    message.usage = { ...response.usage, ...(response.model ? { model: response.model } : {}) };
  return message;
}
