/**
 * What /status says in a chat (pure but for the reads it is given): the model and agent, the
 * session and memory, replies running elsewhere, background tasks, how full the last prompt was,
 * open questions, pairing, the host's own lines and the chat's next scheduled jobs.
 */
import type { InboundMessage } from "../bus/types.js";
import type { Session } from "../sessions/session.js";
import type { ContextBudget } from "./budget/budget.js";
import type { ScheduleView } from "../cron/types.js";
import type { SubagentControl } from "./extensions.js";

/** Session metadata key: the last prompt's size in tokens (the provider's count, else ours). */
export const LAST_PROMPT_TOKENS = "lastPromptTokens";

export interface StatusSources {
  model: string;
  session: Session;
  memoryChars: number;
  /** Replies running in other chats. */
  otherReplies: number;
  agentName?: string;
  subagents?: Pick<SubagentControl, "listForSession">;
  budget?: Pick<ContextBudget, "settings">;
  questions?: { openIn(channel: string, chatId: string): string[] };
  pairing?: { statusLine(): string };
  hostLines?: () => string[];
  schedule?: ScheduleView;
}

export async function statusText(msg: InboundMessage, s: StatusSources): Promise<string> {
  const { session } = s;
  const active = session.total - session.lastConsolidated;
  const lines = [
    `Model: ${s.model}`,
    ...(s.agentName !== undefined ? [`Agent: ${s.agentName}`] : []),
    `Session: ${session.total} messages (${active} not yet consolidated into memory)`,
    `Memory: ${s.memoryChars} characters in MEMORY.md`,
    `Replies running in other chats: ${s.otherReplies}`,
  ];
  const subagents = s.subagents?.listForSession(session.key) ?? [];
  lines.push(
    subagents.length
      ? `Background tasks: ${subagents.map((t) => `${t.label} (${t.id})`).join(", ")}`
      : "Background tasks: none",
  );
  const context = contextLine(session, s.budget);
  if (context) lines.push(context);
  const waiting = s.questions?.openIn(msg.channel, msg.chatId) ?? [];
  if (waiting.length) lines.push(`Waiting for your answer: ${waiting.join("; ")}`);
  if (s.pairing) lines.push(s.pairing.statusLine());
  lines.push(...(s.hostLines?.() ?? []));
  if (s.schedule) {
    const jobs = await s.schedule.nextJobsFor(msg.channel, msg.chatId, 3);
    lines.push(
      jobs.length
        ? `Next scheduled: ${jobs.map((j) => `${j.description} at ${j.nextRunAt.toISOString()} (${j.id})`).join("; ")}`
        : "Next scheduled: nothing",
    );
  }
  return lines.join("\n");
}

/** The last prompt's size against the window, from the session's metadata. */
function contextLine(
  session: Session,
  budget: Pick<ContextBudget, "settings"> | undefined,
): string | undefined {
  const settings = budget?.settings;
  const tokens = session.metadata[LAST_PROMPT_TOKENS];
  if (!settings || typeof tokens !== "number") return undefined;
  const share = Math.round((tokens / settings.windowTokens) * 100);
  return (
    `Context: last prompt ${tokens.toLocaleString("en-US")} tokens of a ` +
    `${settings.windowTokens.toLocaleString("en-US")}-token window (${share} %); ` +
    `prompts are kept under ${settings.budgetTokens.toLocaleString("en-US")}`
  );
}
