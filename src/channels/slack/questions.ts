/**
 * Questions on Slack, pure: a question as Block Kit (the text in mrkdwn sections, the choices as a
 * row of buttons under it), and a `block_actions` payload (a button press, over Socket Mode or
 * HTTP) as the press the adapter hands to the question desk. The adapter posts, edits and answers.
 */
import * as z from "zod";
import type { Question } from "../../bus/types.js";
import { choicesAsText, decodeChoice, encodeChoice } from "../questions.js";
import type { ChoiceClick } from "../types.js";
import { formatSlackMessage } from "./format.js";
import { CHANNEL_NAME } from "./mapping.js";

/** Slack refuses a section whose text is longer (invalid_blocks). */
export const SECTION_LIMIT = 3000;
/** A message holds at most 50 blocks; one goes to the buttons. */
const MAX_SECTIONS = 48;
/** A button's plain_text label. */
const LABEL_LIMIT = 75;
/** Elements per actions block. */
const BUTTONS_PER_ROW = 25;
const CUT_NOTE = "_(the rest is too long to show here)_";

/** Block Kit's section block, as much of it as a question uses. */
interface SectionBlock {
  type: "section";
  text: { type: "mrkdwn"; text: string };
}

/** Block Kit's actions block with buttons. */
interface ActionsBlock {
  type: "actions";
  elements: {
    type: "button";
    action_id: string;
    value: string;
    text: { type: "plain_text"; text: string; emoji: boolean };
    style?: "primary" | "danger";
  }[];
}

export interface QuestionMessage {
  /** Top-level `text`: the notification and the fallback for clients without blocks. */
  text: string;
  blocks: (SectionBlock | ActionsBlock)[];
}

/** The question's text as it would be formatted in a reply, with its choices as buttons under it. */
export function questionMessage(content: string, question: Question): QuestionMessage {
  const sections = formatSlackMessage(content, SECTION_LIMIT);
  const shown =
    sections.length > MAX_SECTIONS ? [...sections.slice(0, MAX_SECTIONS - 1), CUT_NOTE] : sections;
  const blocks: QuestionMessage["blocks"] = shown.map((text) => ({
    type: "section",
    text: { type: "mrkdwn", text },
  }));
  for (let i = 0; i < question.choices.length; i += BUTTONS_PER_ROW) {
    blocks.push({
      type: "actions",
      elements: question.choices.slice(i, i + BUTTONS_PER_ROW).map((choice) => {
        const data = encodeChoice(question.id, choice.id);
        return {
          type: "button",
          action_id: data,
          value: data,
          text: { type: "plain_text", text: label(choice.label), emoji: true },
          ...(choice.style ? { style: choice.style } : {}),
        };
      }),
    });
  }
  // Slack asks for at most 4,000 characters of text; a notification shows far less anyway.
  const text = formatSlackMessage(content)[0] ?? choicesAsText(question);
  return { text, blocks };
}

function label(text: string): string {
  const trimmed = text.trim() || "?";
  return trimmed.length <= LABEL_LIMIT ? trimmed : `${trimmed.slice(0, LABEL_LIMIT - 1)}…`;
}

/** An edit's text: what fits in one message (it replaces the question), and the rest to post after it. */
export function editParts(content: string): { text: string; rest: string[] } {
  const [first, ...rest] = formatSlackMessage(content);
  // An update must carry some text once the blocks are gone (no_text).
  return { text: first ?? "(closed)", rest };
}

/** The fields of a block_actions payload a press needs (Slack sends many more). */
const BlockActionsSchema = z.object({
  type: z.literal("block_actions"),
  user: z.object({ id: z.string().min(1) }),
  channel: z.object({ id: z.string().min(1) }).nullish(),
  container: z
    .object({
      channel_id: z.string().optional(),
      message_ts: z.string().optional(),
      thread_ts: z.string().optional(),
    })
    .nullish(),
  message: z.object({ ts: z.string(), thread_ts: z.string().optional() }).nullish(),
  team: z.object({ id: z.string() }).nullish(),
  actions: z.array(z.object({ action_id: z.string() })).min(1),
});

/** A press on one of palaver's buttons. */
export interface SlackPress {
  /** The Slack channel or DM of the question. */
  chatId: string;
  userId: string;
  questionId: string;
  choiceId: string;
  /** The ts of the message carrying the buttons. */
  messageTs?: string;
  /** The thread the question is in (not set for a message at the top of the channel). */
  threadTs?: string;
  teamId?: string;
}

/**
 * A `block_actions` payload as a press on one of our buttons; undefined for anything else (another
 * kind of interaction, a button whose action_id is not a question's choice).
 */
export function pressOf(payload: unknown): SlackPress | undefined {
  const parsed = BlockActionsSchema.safeParse(payload);
  if (!parsed.success) return undefined;
  const body = parsed.data;
  const choice = decodeChoice(body.actions[0]!.action_id);
  const chatId = body.channel?.id ?? body.container?.channel_id;
  if (!choice || !chatId) return undefined;
  const messageTs = body.message?.ts ?? body.container?.message_ts;
  const thread = body.message?.thread_ts ?? body.container?.thread_ts;
  // A message at the top of a channel that has replies carries its own ts as thread_ts.
  const threadTs = thread && thread !== messageTs ? thread : undefined;
  return {
    chatId,
    userId: body.user.id,
    ...choice,
    ...(messageTs ? { messageTs } : {}),
    ...(threadTs ? { threadTs } : {}),
    ...(body.team?.id ? { teamId: body.team.id } : {}),
  };
}

/** The press as the sink's choose takes it; `senderName` is the presser's username as looked up. */
export function clickOf(press: SlackPress, senderName?: string): ChoiceClick {
  return {
    channel: CHANNEL_NAME,
    chatId: press.chatId,
    senderId: press.userId,
    ...(senderName ? { senderAliases: [senderName] } : {}),
    questionId: press.questionId,
    choiceId: press.choiceId,
    ...(press.threadTs ? { threadId: press.threadTs } : {}),
    metadata: {
      ...(press.messageTs ? { messageId: press.messageTs } : {}),
      ...(press.teamId ? { teamId: press.teamId } : {}),
    },
  };
}

/** The presser-only notice as Slack text (a short plain sentence, escaped like any reply). */
export function noticeText(notice: string): string | undefined {
  return formatSlackMessage(notice)[0];
}
