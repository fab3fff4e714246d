/**
 * Subagents: background workers the agent starts with the `spawn` tool for
 * work that takes a while. Each runs one turn of its own (fresh context,
 * worker tools only, no way to message the user) and reports back through
 * the bus as a system message naming the chat that asked, so the agent
 * tells the user in that chat, in its own words, like any other reply.
 */
import { TaskSet } from "../util/task-set.js";
import { randomUUID } from "node:crypto";
import type { InboundMessage, Origin } from "../bus/types.js";
import { replyPlaceOf, systemMessage } from "../bus/types.js";
import { userFacingLlmError } from "../llm/user-facing.js";
import type { ChatMessage, Provider } from "../llm/types.js";
import { logger, type Logger } from "../log.js";
import { LlmError, errorMessage } from "../util/errors.js";
import { Semaphore } from "../util/semaphore.js";
import { formatLocalTime } from "../util/time.js";
import type { SubagentControl } from "./extensions.js";
import type { PreparedAgent } from "./agents/named-agents.js";
import type { ContextBudget } from "./budget/budget.js";
import { runTurn, type ApproveCall } from "./runner.js";
import { withAgentScope } from "../usage/scope.js";
import type { ToolRegistry } from "./tools/registry.js";
import type { ToolContext, UntrustedRead } from "./tools/types.js";
import { untrustedMetadata } from "./untrusted.js";

/** Labels longer than this are cut (they are shown to the model and in logs). */
export const LABEL_MAX_CHARS = 30;

const NO_RESULT = "Task completed but no final response was generated.";

export interface SubagentManagerOptions {
  provider: Provider;
  /** The worker tools (createWorkerTools): no message, spawn or cron. */
  tools: ToolRegistry;
  bus: { publishInbound(msg: InboundMessage): void };
  /** Why no subagent may start now (the budget is spent: usage/budget.ts), or undefined. */
  paused?: () => string | undefined;
  workspace: string;
  /** Subagents running at once; the rest wait in order. */
  maxConcurrent: number;
  maxIterations: number;
  /** A result cut off at the output token limit is continued this many times (agents.defaults.maxContinuations). */
  maxContinuations?: number;
  toolResultMaxChars: number;
  /**
   * The approval check of each tool call (approvals/gate.ts). A subagent's questions go to the chat
   * that spawned it; with no sender, the channel's admins answer (or nobody: denied).
   */
  approve?: ApproveCall;
  /** The subagents' own context budget (their prompts are fitted like the agent's). */
  budget?: ContextBudget;
  log?: Logger;
  /** For the time in the prompt (tests). */
  now?: () => Date;
}

export interface SpawnRequest {
  task: string;
  label?: string;
  /** The chat that asked; the result is reported there. */
  origin: Origin;
  /** What the spawning turn's sender wrote: the subagent's outward calls are judged against it. */
  senderText?: string;
  /** The untrusted content the spawning turn had read: the subagent starts marked with it. */
  untrusted?: readonly UntrustedRead[];
  /** A named agent (agents/<name>.md) to run instead of the generic worker: its model, tools, instructions. */
  agent?: PreparedAgent;
}

export interface SpawnResult {
  id: string;
  label: string;
  /** True when it waits for a free slot instead of starting now. */
  queued: boolean;
}

interface Entry {
  readonly id: string;
  readonly label: string;
  readonly task: string;
  readonly origin: Origin;
  readonly senderText: string | undefined;
  readonly untrusted: readonly UntrustedRead[];
  readonly agent: PreparedAgent | undefined;
  readonly sessionKey: string;
  readonly controller: AbortController;
}

type Outcome = { ok: boolean; result: string; untrusted: readonly UntrustedRead[] } | "cancelled";

export class SubagentManager implements SubagentControl {
  /** Subagents not yet finished or cancelled (running or waiting for a slot). */
  private readonly entries = new Map<string, Entry>();
  /** Every background run until it has settled, cancelled ones included (shutdown waits for them). */
  private readonly settling = new TaskSet();
  private readonly slots: Semaphore;
  private readonly log: Logger;
  private closed = false;

  constructor(private readonly opts: SubagentManagerOptions) {
    this.slots = new Semaphore(Math.max(1, Math.floor(opts.maxConcurrent)));
    this.log = opts.log ?? logger("subagents");
  }

  /** Starts a subagent in the background and returns at once. Throws after shutdown. */
  spawn(req: SpawnRequest): SpawnResult {
    if (this.closed) throw new Error("subagents are shutting down; no new ones start");
    const paused = this.opts.paused?.();
    if (paused) throw new Error(`background tasks are ${paused}`);
    const task = req.task.trim();
    if (task === "") throw new Error("the task is empty");
    const origin = req.origin;
    const entry: Entry = {
      id: randomUUID().slice(0, 8),
      label: req.label?.trim() || defaultLabel(req.agent ? `${req.agent.name}: ${task}` : task),
      task,
      origin,
      senderText: req.senderText,
      untrusted: [...(req.untrusted ?? [])],
      agent: req.agent,
      sessionKey: origin.sessionKey ?? `${origin.channel}:${origin.chatId}`,
      controller: new AbortController(),
    };
    // acquire() takes a free slot synchronously, so this tells whether this one will wait.
    const queued = this.slots.inUse >= Math.max(1, Math.floor(this.opts.maxConcurrent));
    this.entries.set(entry.id, entry);
    void this.settling.add(
      this.run(entry)
        .catch((err: unknown) => this.log.error({ err, id: entry.id }, "subagent crashed"))
        .finally(() => {
          if (this.entries.get(entry.id) === entry) this.entries.delete(entry.id);
        }),
    );
    this.log.info(
      { id: entry.id, label: entry.label, agent: entry.agent?.name, session: entry.sessionKey, queued },
      "subagent spawned",
    );
    return { id: entry.id, label: entry.label, queued };
  }

  cancelForSession(sessionKey: string): number {
    let n = 0;
    for (const entry of [...this.entries.values()]) {
      if (entry.sessionKey !== sessionKey) continue;
      this.cancel(entry, "cancelled");
      n++;
    }
    return n;
  }

  /** Subagents running or waiting for a slot, across all chats (metrics). */
  get active(): number {
    return this.entries.size;
  }

  listForSession(sessionKey: string): { id: string; label: string }[] {
    return [...this.entries.values()]
      .filter((e) => e.sessionKey === sessionKey)
      .map((e) => ({ id: e.id, label: e.label }));
  }

  async shutdown(timeoutMs: number): Promise<void> {
    this.closed = true;
    for (const entry of [...this.entries.values()]) this.cancel(entry, "shutdown");
    if (this.settling.size === 0) return;
    if (!(await this.settling.settle(timeoutMs))) {
      this.log.warn({ left: this.settling.size, timeoutMs }, "shutdown: subagents still settling");
    }
  }

  private cancel(entry: Entry, reason: string): void {
    this.entries.delete(entry.id);
    entry.controller.abort(new Error(reason));
    this.log.info({ id: entry.id, label: entry.label, reason }, "subagent cancelled");
  }

  private async run(entry: Entry): Promise<void> {
    const signal = entry.controller.signal;
    const release = await acquireUnlessAborted(this.slots, signal);
    // Cancelled while it waited: it never starts.
    if (!release) return;
    let outcome: Outcome;
    try {
      // A named agent's calls are counted as its own, kind "subagent" (the generic worker's
      // provider records that kind itself).
      outcome = await (entry.agent
        ? withAgentScope({ agent: entry.agent.name, kind: "subagent", session: entry.sessionKey }, () =>
            this.execute(entry),
          )
        : this.execute(entry));
    } finally {
      release();
    }
    if (outcome === "cancelled" || signal.aborted) return;
    const { untrusted } = outcome;
    this.entries.delete(entry.id);
    this.log.info({ id: entry.id, label: entry.label, ok: outcome.ok }, "subagent finished");
    this.opts.bus.publishInbound(
      systemMessage({
        senderId: "subagent",
        content: announcement({
          label: entry.label,
          task: entry.task,
          ok: outcome.ok,
          result: outcome.result,
        }),
        origin: { ...entry.origin, sessionKey: entry.sessionKey },
        // What the subagent read marks the turn that reads its report (agent/untrusted.ts).
        metadata: { subagentId: entry.id, ...untrustedMetadata(untrusted) },
      }),
    );
  }

  private async execute(entry: Entry): Promise<Outcome> {
    const { workspace } = this.opts;
    const provider = entry.agent?.provider ?? this.opts.provider;
    const tools = entry.agent?.tools ?? this.opts.tools;
    const signal = entry.controller.signal;
    const log = this.log.child({ subagent: entry.id });
    log.info({ label: entry.label }, "subagent starting");
    const ctx: ToolContext = {
      workspace,
      channel: entry.origin.channel,
      chatId: entry.origin.chatId,
      sessionKey: entry.sessionKey,
      signal,
      ...replyPlaceOf(entry.origin),
      ...(entry.origin.metadata ? { metadata: entry.origin.metadata } : {}),
      ...(entry.senderText !== undefined ? { senderText: entry.senderText } : {}),
      // Worker tools never publish; this only catches a misconfigured registry.
      publish: (msg) =>
        log.warn({ channel: msg.channel, chatId: msg.chatId }, "subagent tried to message a chat; dropped"),
      // Spawned from a marked turn, it starts marked: its outward calls are asked like its spawner's.
      turn: { sentToOriginChat: false, untrusted: [...entry.untrusted] },
    };
    const messages: ChatMessage[] = [
      {
        role: "system",
        content: subagentPrompt({
          task: entry.task,
          workspace,
          tools: tools.names,
          ...(entry.agent ? { agent: entry.agent } : {}),
          now: (this.opts.now ?? (() => new Date()))(),
        }),
      },
      { role: "user", content: entry.task },
    ];
    const run = (prompt: ChatMessage[]) =>
      runTurn({
        provider,
        tools,
        messages: prompt,
        maxIterations: entry.agent?.maxIterations ?? this.opts.maxIterations,
        maxContinuations: this.opts.maxContinuations ?? 0,
        toolResultMaxChars: this.opts.toolResultMaxChars,
        ctx,
        onToolHint: (hint) => log.debug({ hint }, "subagent tool call"),
        ...(this.opts.approve ? { approve: this.opts.approve } : {}),
        ...(this.opts.budget ? { budget: this.opts.budget } : {}),
      });
    try {
      let turn = await run(messages);
      if (!turn.hitIterationLimit && isTooShort(turn.content)) {
        // "Done." tells the user nothing: one follow-up asks for what was done and found.
        log.info(
          { chars: turn.content?.trim().length ?? 0 },
          "subagent result too short; asking for details",
        );
        const followUp = await run([...messages, ...turn.messages, detailsRequest()]);
        if (followUp.content?.trim()) turn = followUp;
      }
      const untrusted = ctx.turn.untrusted ?? [];
      if (turn.hitIterationLimit) return { ok: false, result: turn.content ?? NO_RESULT, untrusted };
      return { ok: true, result: turn.content?.trim() || NO_RESULT, untrusted };
    } catch (err) {
      if (signal.aborted) return "cancelled";
      log.error({ err }, "subagent failed");
      const result = err instanceof LlmError ? userFacingLlmError(err) : `Error: ${errorMessage(err)}`;
      return { ok: false, result, untrusted: ctx.turn.untrusted ?? [] };
    }
  }
}

/** A result shorter than this gets one follow-up asking for the details. */
const SHORT_RESULT_CHARS = 200;

function isTooShort(content: string | null): boolean {
  return (content?.trim().length ?? 0) < SHORT_RESULT_CHARS;
}

function detailsRequest(): ChatMessage {
  return {
    role: "user",
    content:
      "Your result is very short. Give the details the main assistant needs to tell the user: " +
      "what you did, what you found (the facts and numbers themselves), and the paths of any files you wrote.",
  };
}

/** The first ~30 characters of the task, on one line. */
export function defaultLabel(task: string): string {
  const line = task.replace(/\s+/g, " ").trim();
  return line.length > LABEL_MAX_CHARS ? `${line.slice(0, LABEL_MAX_CHARS).trimEnd()}…` : line;
}

/** The system prompt of a subagent: one task, no chat, a short result. */
export function subagentPrompt(opts: {
  task: string;
  workspace: string;
  tools: string[];
  /** A named agent: its name and instructions come first. */
  agent?: Pick<PreparedAgent, "name" | "instructions">;
  now: Date;
}): string {
  const persona = opts.agent ? `# Agent: ${opts.agent.name}\n\n${opts.agent.instructions}\n\n` : "";
  return `${persona}# Subagent

You are a subagent: a background worker that the main assistant started to do one task on its own. When you finish, your final reply goes back to the main assistant, which tells the user.

## Your task
${opts.task}

## Rules
1. Stay focused: do only the assigned task, nothing else.
2. You cannot message the user and nobody will answer questions: make reasonable assumptions and say which ones you made.
3. Use tools to do the work and check facts; do not guess what a file, command or web page says.
4. Never claim to have done something you did not do. If something fails, say what and why.
5. Be concise in your final reply: what you did, what you found, the paths of files you wrote.

## Tools
${opts.tools.length ? opts.tools.join(", ") : "(none)"}

## Workspace
Your workspace is ${opts.workspace}. Relative paths in file tools start there; keep your files inside it.

Current time: ${formatLocalTime(opts.now)}`;
}

/** The system message that reports a subagent's result to the agent (nanobot's wording). */
export function announcement(opts: { label: string; task: string; ok: boolean; result: string }): string {
  const status = opts.ok ? "completed successfully" : "failed";
  return (
    `[Subagent "${opts.label}" ${status}]\n\n` +
    `Task: ${opts.task}\n\n` +
    `Result:\n${opts.result}\n\n` +
    "Summarize this naturally for the user. Keep it brief (1-2 sentences). " +
    'Do not mention technical details like "subagent" or task IDs.'
  );
}

/**
 * A slot, or undefined when `signal` fires first. A slot that arrives after
 * the abort is handed on at once, so a cancelled waiter never blocks others.
 */
async function acquireUnlessAborted(sem: Semaphore, signal: AbortSignal): Promise<(() => void) | undefined> {
  const pending = sem.acquire();
  let onAbort: (() => void) | undefined;
  const aborted = new Promise<undefined>((resolve) => {
    onAbort = () => resolve(undefined);
    if (signal.aborted) resolve(undefined);
    else signal.addEventListener("abort", onAbort, { once: true });
  });
  const release = await Promise.race([pending, aborted]);
  if (onAbort) signal.removeEventListener("abort", onAbort);
  if (release && !signal.aborted) return release;
  void pending.then((r) => r());
  return undefined;
}
