/**
 * The approval gate: what runs before every tool call when tools.approval.mode is not "off". The
 * policy decides (allow, deny, ask); "ask" puts the question to the chat through the desk and
 * waits. Whatever happens, the model gets a result for the call: the tool's own, or a denial it
 * can act on. Every decision is logged and counted.
 */
import type { ApproveCall } from "../agent/runner.js";
import type { ToolContext } from "../agent/tools/types.js";
import type { ToolCall } from "../llm/types.js";
import { logger, type Logger } from "../log.js";
import { describeCall } from "./describe.js";
import { ruleCovers } from "./exec-shape.js";
import type { Answer, AskRequest, DeskChoice } from "../agent/questions.js";
import { formatWait } from "./questions.js";
import type { ApprovalDecision, ApprovalPolicy, ChatRuleStore } from "./types.js";

/** How a call's approval ended, as counted in palaver_approvals_total{decision}. */
export type ApprovalOutcome = "allowed" | "denied" | "approved" | "rejected" | "timeout" | "stopped";

export interface ApprovalMeter {
  /** `waitedMs`: how long a person was asked (only for calls that asked). */
  approval(outcome: ApprovalOutcome, waitedMs?: number): void;
}

export interface GateOptions {
  policy: ApprovalPolicy;
  desk: { ask(req: AskRequest): Promise<Answer> };
  chatRules: ChatRuleStore;
  /** How long a question waits (for the model's "no answer within …"). */
  timeoutMs: number;
  meter?: ApprovalMeter;
  log?: Logger;
  /** Whether exec commands can reach the network now (outward.ts); absent: they can. */
  execNetwork?: () => boolean;
}

const APPROVE: DeskChoice = {
  id: "approve",
  label: "Approve",
  style: "primary",
  verdict: "✅ Approved",
  notice: "Approved.",
  words: ["y", "yes", "ok", "approve", "approved"],
};
const DENY: DeskChoice = {
  id: "deny",
  label: "Deny",
  style: "danger",
  verdict: "❌ Denied",
  notice: "Denied.",
  words: ["n", "no", "deny", "denied"],
};
const ALWAYS_ID = "always";

/** "Always allow", naming what it will cover (`find` without -exec ..., every `write_file` call). */
function alwaysChoice(covers: string): DeskChoice {
  return {
    id: ALWAYS_ID,
    label: "Always allow this in this chat",
    verdict: `✅ Always allowed in this chat (${covers})`,
    notice: `Allowed, and from now on in this chat: ${covers}.`,
    words: ["a", "always"],
  };
}

/** The prompt's line on what "Always" covers, or why it is not offered. */
function alwaysLine(decision: ApprovalDecision): string {
  if (decision.always) return `\n"Always" allows from now on in this chat: ${ruleCovers(decision.always)}.`;
  if (decision.alwaysWithheld) return `\n"Always" is not offered: ${decision.alwaysWithheld}.`;
  return "";
}

/** The runner's approval check (RunTurnOptions.approve) over a policy and a question desk. */
export function createApprovalGate(opts: GateOptions): ApproveCall {
  const log = opts.log ?? logger("approvals");
  return async (call, ctx, { readOnly }) => {
    const decision = opts.policy.decide({
      tool: call.name,
      args: call.arguments,
      channel: ctx.channel,
      chatId: ctx.chatId,
      workspace: ctx.workspace,
      readOnly,
      untrusted: ctx.turn.untrusted ?? [],
      senderText: ctx.senderText ?? "",
      execNetwork: opts.execNetwork?.() ?? true,
    });
    const fields = {
      tool: call.name,
      args: shortArgs(call.arguments),
      channel: ctx.channel,
      chatId: ctx.chatId,
      layer: decision.layer,
      reason: decision.reason,
    };
    if (decision.action === "allow") {
      log.debug({ ...fields, decision: "allowed" }, "tool call allowed");
      opts.meter?.approval("allowed");
      return null;
    }
    if (decision.action === "deny") {
      log.info({ ...fields, decision: "denied" }, "tool call denied by policy");
      opts.meter?.approval("denied");
      return `Error: denied by policy: ${sentence(decision.reason)} Do not retry this call.`;
    }
    const asked = performance.now();
    const done = (outcome: ApprovalOutcome, by?: string) => {
      const waitedMs = Math.round(performance.now() - asked);
      log.info({ ...fields, decision: outcome, by, waitedMs }, `tool call ${outcome}`);
      opts.meter?.approval(outcome, waitedMs);
    };
    let answer: Answer;
    try {
      answer = await opts.desk.ask(approvalRequest(call, ctx, decision));
    } catch (err) {
      done("stopped");
      throw err;
    }
    if ("nobody" in answer) {
      log.info({ ...fields, decision: "denied" }, "tool call denied: nobody can approve it in this chat");
      opts.meter?.approval("denied");
      return (
        `Error: not approved: ${decision.reason.replace(/\.$/, "")}, and no one can approve it in this chat ` +
        `(work in the background, or no person at the terminal). The call was not run. ` +
        `Do not retry it; tell the user what you wanted to do.`
      );
    }
    if ("timedOut" in answer) {
      done("timeout");
      return `Error: not approved: no answer within ${formatWait(opts.timeoutMs)}. The call was not run.`;
    }
    const choiceId = "choiceId" in answer ? answer.choiceId : DENY.id;
    if (choiceId === APPROVE.id) {
      done("approved", answer.by);
      return null;
    }
    if (choiceId === ALWAYS_ID && decision.always) {
      try {
        await opts.chatRules.add({
          channel: ctx.channel,
          chatId: ctx.chatId,
          ...decision.always,
          addedBy: answer.by,
        });
      } catch (err) {
        // The person approved this call; only the "from now on" part could not be kept.
        log.warn(
          { ...fields, err },
          "could not save the chat's always-allow rule; this call runs, the next asks",
        );
      }
      done("approved", answer.by);
      return null;
    }
    done("rejected", answer.by);
    const said = "text" in answer && answer.text ? ` They wrote: "${answer.text}".` : "";
    return `Error: denied by the user (${answer.by}).${said} Do not retry it; ask the user what to do instead.`;
  };
}

function approvalRequest(call: ToolCall, ctx: ToolContext, decision: ApprovalDecision): AskRequest {
  const summary = describeCall(call.name, call.arguments);
  return {
    kind: "approval",
    channel: ctx.channel,
    chatId: ctx.chatId,
    ...(ctx.threadId !== undefined ? { threadId: ctx.threadId } : {}),
    ...(ctx.metadata ? { metadata: ctx.metadata } : {}),
    ...(ctx.sender ? { sender: ctx.sender } : {}),
    text:
      `🔐 May I do this?\n${summary}\nWhy I ask: ${sentence(decision.reason)}` +
      untrustedLine(ctx) +
      alwaysLine(decision),
    summary,
    choices: decision.always ? [APPROVE, DENY, alwaysChoice(ruleCovers(decision.always))] : [APPROVE, DENY],
    signal: ctx.signal,
  };
}

/** Where a marked turn's untrusted content came from, as a line of the prompt (empty when unmarked). */
function untrustedLine(ctx: ToolContext, max = 3): string {
  const reads = ctx.turn.untrusted ?? [];
  if (reads.length === 0) return "";
  const unique = [...new Map(reads.map((r) => [`${r.tool}\u0000${r.source}`, r])).values()];
  const cut = (source: string) => (source.length > 120 ? `${source.slice(0, 119)}…` : source);
  const shown = unique.slice(0, max).map((r) => `${cut(r.source)} (${r.tool})`);
  const more = unique.length > max ? ` and ${unique.length - max} more` : "";
  return `\nThis turn read content from ${shown.join(", ")}${more}: it may be what asks for this.`;
}

/** The arguments as JSON, cut to a length that fits a log line and a chat prompt. */
function shortArgs(args: Record<string, unknown>, max = 300): string {
  const json = JSON.stringify(args);
  return json.length > max ? `${json.slice(0, max - 1)}…` : json;
}

/** The policy's reason as a sentence with one final period, however it was written. */
function sentence(reason: string): string {
  return `${reason.replace(/\.+$/, "")}.`;
}
