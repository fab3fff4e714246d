/**
 * Questions with buttons on Telegram, pure: a question's choices as an inline keyboard, a
 * callback query (a press) as the ChoiceClick the sink decides on, and the presser's notice cut to
 * what answerCallbackQuery takes. The adapter does the calls (adapter.ts, send.ts).
 */
import type { CallbackQuery, InlineKeyboardButton, InlineKeyboardMarkup } from "grammy/types";
import type { Question } from "../../bus/types.js";
import { decodeChoice, encodeChoice } from "../questions.js";
import type { ChoiceClick } from "../types.js";
import { CHANNEL, isGroupChat, topicOf } from "./mapping.js";

/** Telegram's limit for the text of a callback query answer. */
const MAX_NOTICE = 200;
/** Labels that fit side by side on a phone; past this each button gets its own row. */
const ONE_ROW_CHARS = 30;
const ONE_ROW_BUTTONS = 4;

/** What an edit sends to take the buttons away (omitting reply_markup would keep them on some clients). */
export const NO_BUTTONS: InlineKeyboardMarkup = { inline_keyboard: [] };

/** The choices as buttons: in one row when the labels are short, else one per row so none is cut off. */
export function inlineKeyboard(question: Question): InlineKeyboardMarkup {
  const buttons: InlineKeyboardButton[] = question.choices.map((choice) => ({
    text: choice.label,
    callback_data: encodeChoice(question.id, choice.id),
    ...(choice.style ? { style: choice.style } : {}),
  }));
  const chars = question.choices.reduce((sum, c) => sum + c.label.length, 0);
  const oneRow = buttons.length <= ONE_ROW_BUTTONS && chars <= ONE_ROW_CHARS;
  return { inline_keyboard: oneRow ? [buttons] : buttons.map((b) => [b]) };
}

/**
 * The press as the sink sees it, or undefined when it is not an answer to one of our questions:
 * data that is not ours (another bot's keyboard, an old version's), or a button with no chat to
 * name (an inline-mode message). Senders are named as on inbound messages (mapping.ts): the user
 * id, with the @username as an alias.
 */
export function choiceClickOf(query: CallbackQuery): ChoiceClick | undefined {
  const choice = decodeChoice(query.data ?? "");
  const message = query.message;
  if (!choice || !message) return undefined;
  // An inaccessible message (older than 48 hours) has only its chat and id: no topic, no type.
  const threadId = message.date === 0 ? undefined : topicOf(message);
  const { username } = query.from;
  return {
    channel: CHANNEL,
    chatId: String(message.chat.id),
    senderId: String(query.from.id),
    ...(username ? { senderAliases: [`@${username}`] } : {}),
    questionId: choice.questionId,
    choiceId: choice.choiceId,
    ...(threadId !== undefined ? { threadId: String(threadId) } : {}),
    metadata: {
      chatType: message.chat.type,
      isGroup: isGroupChat(message),
    },
  };
}

/**
 * answerCallbackQuery refuses text over 200 characters (UTF-16 units, as Telegram counts): a longer
 * notice is cut with an ellipsis, never inside a surrogate pair.
 */
export function callbackNotice(notice: string): string {
  const text = notice.trim();
  if (text.length <= MAX_NOTICE) return text;
  let cut = "";
  for (const char of text) {
    if (cut.length + char.length > MAX_NOTICE - 1) break;
    cut += char;
  }
  return `${cut}…`;
}
