/**
 * The heartbeat: every intervalSeconds it reads HEARTBEAT.md in the
 * workspace and, when the file lists tasks, asks the LLM (through a private
 * `heartbeat` tool, so there is no free text to parse) whether any of them is
 * due now. Due tasks go on the bus as a system message for the chat the user
 * was last active in; the agent does them in the "heartbeat" session and
 * replies HEARTBEAT_OK when there is nothing worth telling (never delivered).
 * A file with no tasks costs nothing: no LLM call at all.
 */
import { join } from "node:path";
import * as z from "zod";
import { DEFAULT_PROMPT_FILE_MAX_CHARS, readForPrompt } from "../util/prompt-file.js";
import { formatLocalTime } from "../util/time.js";
import type { InboundMessage, Origin } from "../bus/types.js";
import { systemMessage } from "../bus/types.js";
import type { ChatMessage, Provider, ToolDefinition } from "../llm/types.js";
import { logger, type Logger } from "../log.js";
import { secondsToTimerMs } from "../util/timers.js";
import { PalaverError, errorMessage, isAbortError } from "../util/errors.js";

export const HEARTBEAT_FILE = "HEARTBEAT.md";
/** The session heartbeat turns run in, apart from the user's conversations. */
export const HEARTBEAT_SESSION = "heartbeat";
/** What the agent answers when a due task turned out to need no message. */
export const HEARTBEAT_OK = "HEARTBEAT_OK";

export type HeartbeatOutcome = "disabled" | "no-file" | "no-tasks" | "skip" | "run" | "no-chat" | "paused";

export interface HeartbeatOptions {
  workspace: string;
  provider: Provider;
  bus: { publishInbound(msg: InboundMessage): void };
  intervalSeconds: number;
  enabled: boolean;
  /** The chat the user last talked in; the heartbeat reports there. */
  lastActiveChat: () => Origin | undefined;
  log?: Logger;
  /** Model for the decision call (default: the provider's). */
  model?: string;
  /** The most of HEARTBEAT.md sent to the LLM (agents.defaults.promptFileMaxChars; default 32,000). */
  promptFileMaxChars?: number;
  /** For the time in the decision prompt (tests). */
  now?: () => Date;
  /** Why checks must not run now (the budget is spent: usage/budget.ts), or undefined. Read per check. */
  paused?: () => string | undefined;
}

const DECISION_TOOL: ToolDefinition = {
  type: "function",
  function: {
    name: "heartbeat",
    description: "Report the heartbeat decision after reviewing the tasks.",
    parameters: {
      type: "object",
      properties: {
        action: {
          type: "string",
          enum: ["skip", "run"],
          description: "skip = nothing is due now, run = at least one task is due now",
        },
        tasks: {
          type: "string",
          description: "The tasks that are due now, in plain words (required for run)",
        },
      },
      required: ["action"],
    },
  },
};

const Decision = z.object({
  action: z.enum(["skip", "run"]),
  tasks: z.string().optional(),
});

const DECISION_SYSTEM_PROMPT =
  "You are a heartbeat agent. You are given a list of periodic tasks (HEARTBEAT.md) and the current time. " +
  "Decide whether any of the tasks is due now, given the current time and what each task says about when " +
  'to do it. Do not do the tasks yourself. Call the heartbeat tool: action "run" with the due tasks, or ' +
  'action "skip" when nothing is due.';

export class HeartbeatService {
  private readonly log: Logger;
  private timer: NodeJS.Timeout | undefined;
  private inFlight: Promise<HeartbeatOutcome> | undefined;
  private current: AbortController | undefined;

  constructor(private readonly opts: HeartbeatOptions) {
    this.log = opts.log ?? logger("heartbeat");
  }

  /** Arms the interval (first check after one interval). Does nothing when disabled or already started. */
  start(): void {
    if (!this.opts.enabled) {
      this.log.info("heartbeat disabled");
      return;
    }
    if (this.timer) return;
    // The schema bounds intervalSeconds; clamping here too keeps a bad value from becoming a 1 ms loop.
    const ms = Math.max(1000, secondsToTimerMs(this.opts.intervalSeconds));
    this.timer = setInterval(() => this.onTimer(), ms);
    // The gateway stays up on its own; a pending heartbeat must not keep a finished process alive.
    this.timer.unref();
    this.log.info({ intervalSeconds: this.opts.intervalSeconds }, "heartbeat started");
  }

  /** Clears the interval and aborts a check in progress. */
  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    this.current?.abort(new Error("heartbeat stopped"));
  }

  /** Resolves when no check is in progress (its outcome or failure is not reported here). */
  async idle(): Promise<void> {
    await this.inFlight?.catch(() => undefined);
  }

  /**
   * One check. While one is in progress another call gets that same check
   * instead of starting a second one. Rejects when the LLM call fails.
   */
  tick(): Promise<HeartbeatOutcome> {
    if (this.inFlight) return this.inFlight;
    const controller = new AbortController();
    this.current = controller;
    const check = this.check(controller.signal).finally(() => {
      if (this.current === controller) this.current = undefined;
      this.inFlight = undefined;
    });
    this.inFlight = check;
    return check;
  }

  private onTimer(): void {
    if (this.inFlight) {
      this.log.debug("previous heartbeat still running; skipping this one");
      return;
    }
    this.tick().then(
      (outcome) => this.log.debug({ outcome }, "heartbeat checked"),
      (err: unknown) => {
        if (isAbortError(err)) this.log.debug("heartbeat check aborted");
        else this.log.error({ err }, "heartbeat check failed");
      },
    );
  }

  private async check(signal: AbortSignal): Promise<HeartbeatOutcome> {
    if (!this.opts.enabled) return "disabled";
    // Before the file and the decision call: a spent budget buys no heartbeat at all.
    if (this.opts.paused?.()) return "paused";
    const text = await this.readFile();
    if (text === undefined) return "no-file";
    const tasks = actionableContent(text);
    if (tasks === "") return "no-tasks";

    const origin = this.opts.lastActiveChat();
    if (!origin) {
      // Nobody to tell: deciding would only cost a call.
      this.log.info("heartbeat has tasks but no chat has been active yet; skipping");
      return "no-chat";
    }

    const decision = await this.decide(tasks, signal);
    if (decision.action === "skip") {
      this.log.debug("heartbeat: nothing due");
      return "skip";
    }
    const due = decision.tasks?.trim() || tasks;
    this.log.info(
      { channel: origin.channel, chatId: origin.chatId },
      "heartbeat: tasks due, asking the agent",
    );
    this.opts.bus.publishInbound(
      systemMessage({
        senderId: "heartbeat",
        content: heartbeatMessage(due),
        origin,
        sessionKey: HEARTBEAT_SESSION,
      }),
    );
    return "run";
  }

  private async readFile(): Promise<string | undefined> {
    const path = join(this.opts.workspace, HEARTBEAT_FILE);
    try {
      // Missing: undefined. Capped like the system prompt's files: a huge HEARTBEAT.md must not go whole into every check.
      const max = this.opts.promptFileMaxChars ?? DEFAULT_PROMPT_FILE_MAX_CHARS;
      return await readForPrompt(path, max, HEARTBEAT_FILE);
    } catch (err) {
      const code = (err as { code?: unknown }).code;
      if (code !== "ENOENT") this.log.warn({ err, path }, "cannot read HEARTBEAT.md");
      return undefined;
    }
  }

  private async decide(tasks: string, signal: AbortSignal): Promise<z.infer<typeof Decision>> {
    const now = (this.opts.now ?? (() => new Date()))();
    const messages: ChatMessage[] = [
      { role: "system", content: DECISION_SYSTEM_PROMPT },
      {
        role: "user",
        content:
          `Current time: ${formatLocalTime(now)}\n\n` +
          `Review the following HEARTBEAT.md and decide whether any task is due now.\n\n${tasks}`,
      },
    ];
    let response;
    try {
      response = await this.opts.provider.chat(
        { messages, tools: [DECISION_TOOL], ...(this.opts.model ? { model: this.opts.model } : {}) },
        signal,
      );
    } catch (err) {
      if (isAbortError(err)) throw err;
      throw new PalaverError(`heartbeat decision failed: ${errorMessage(err)}`, { cause: err });
    }
    const call = response.toolCalls.find((c) => c.name === "heartbeat");
    if (!call) return { action: "skip" };
    const parsed = Decision.safeParse(call.arguments);
    if (!parsed.success) {
      this.log.warn({ arguments: call.rawArguments }, "heartbeat decision unreadable; skipping");
      return { action: "skip" };
    }
    return parsed.data;
  }
}

/** The system message that asks the agent to do the due tasks. */
export function heartbeatMessage(tasks: string): string {
  return (
    `[Heartbeat] These periodic tasks are due now:\n${tasks}\n\n` +
    "Do them and report the result briefly. If, after checking, there is nothing worth telling the user, " +
    `reply with exactly ${HEARTBEAT_OK}.`
  );
}

/**
 * HEARTBEAT.md without what is not a task: HTML comments, headings, blank
 * lines, empty checkbox items and checked (completed) ones. Empty when the
 * file holds no task, e.g. the onboarding template.
 */
export function actionableContent(markdown: string): string {
  const withoutComments = markdown.replace(/<!--[\s\S]*?(-->|$)/g, "");
  return withoutComments
    .split(/\r?\n/)
    .map((line) => line.trimEnd())
    .filter((line) => isActionableLine(line.trim()))
    .join("\n");
}

function isActionableLine(line: string): boolean {
  if (line === "" || line.startsWith("#")) return false;
  // Horizontal rules and bullets with nothing after them.
  if (/^([-*_]\s*){3,}$/.test(line) || /^[-*+]$/.test(line)) return false;
  const item = /^[-*+]\s+\[( |x|X)?\]\s*(.*)$/.exec(line);
  if (item) return item[1] !== "x" && item[1] !== "X" && (item[2] ?? "").trim() !== "";
  return true;
}

/**
 * True when an agent's reply to a heartbeat means "nothing to tell": exactly
 * HEARTBEAT_OK (any case, wrapped in whitespace, punctuation or markdown) or
 * empty. Anything more is delivered: a real message is never swallowed
 * because it also mentions the token.
 */
export function isNothingToDo(reply: string | null | undefined): boolean {
  const core = (reply ?? "").replace(/^[^A-Za-z0-9]+|[^A-Za-z0-9]+$/g, "");
  return core === "" || /^heartbeat[_\s-]?ok$/i.test(core);
}
