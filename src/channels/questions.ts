/**
 * How a question's buttons are named on every platform: `q:<questionId>:<choiceId>`. Telegram allows
 * 64 bytes of callback_data, Discord 100 characters of custom_id, Slack 255 of action_id; ids are
 * short and URL-safe (bus/types.ts `Question`), so this fits all three.
 */
import type { Question } from "../bus/types.js";

const PREFIX = "q:";
const ID = /^[a-z0-9_-]{1,16}$/;

export function encodeChoice(questionId: string, choiceId: string): string {
  return `${PREFIX}${questionId}:${choiceId}`;
}

/** The question and choice a button names; undefined for data that is not one of ours. */
export function decodeChoice(data: string): { questionId: string; choiceId: string } | undefined {
  if (!data.startsWith(PREFIX) || data.length > 64) return undefined;
  const [questionId, choiceId, ...rest] = data.slice(PREFIX.length).split(":");
  if (rest.length || !questionId || !choiceId || !ID.test(questionId) || !ID.test(choiceId)) return undefined;
  return { questionId, choiceId };
}

/** The choices as a line of text, for a channel without buttons (and as a hint under the buttons). */
export function choicesAsText(question: Question): string {
  return `Reply ${question.choices.map((c) => `"${c.label}"`).join(", ")}.`;
}
