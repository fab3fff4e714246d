/**
 * Questions with buttons on Discord, pure: a question's choices as message components (action rows
 * of buttons), a button press as a ChoiceClick, and where an "edit" goes. The adapter does the
 * calls; nothing here touches the network.
 */
import { ActionRowBuilder, ButtonBuilder, ButtonStyle } from "discord.js";
import type { Choice, Question } from "../../bus/types.js";
import { decodeChoice, encodeChoice } from "../questions.js";
import type { ChoiceClick } from "../types.js";
import {
  CHANNEL,
  placeMetadata,
  threadOf,
  senderMetadata,
  type DiscordPlaceView,
  type DiscordUserView,
} from "./mapping.js";

/** Discord's limits on message components: 5 buttons per action row, 5 rows, 80-character labels. */
const BUTTONS_PER_ROW = 5;
const MAX_ROWS = 5;
const MAX_LABEL_CHARS = 80;

export type ButtonRow = ActionRowBuilder<ButtonBuilder>;

/**
 * The choices as rows of buttons, in order. Discord refuses a message with more than 25 buttons, so
 * choices past that are left out (questions have a handful; a refused message would lose them all).
 */
export function questionComponents(question: Question): ButtonRow[] {
  const buttons = question.choices
    .slice(0, BUTTONS_PER_ROW * MAX_ROWS)
    .map((choice) => button(question.id, choice));
  const rows: ButtonRow[] = [];
  for (let i = 0; i < buttons.length; i += BUTTONS_PER_ROW) {
    rows.push(new ActionRowBuilder<ButtonBuilder>().addComponents(buttons.slice(i, i + BUTTONS_PER_ROW)));
  }
  return rows;
}

function button(questionId: string, choice: Choice): ButtonBuilder {
  return new ButtonBuilder()
    .setStyle(buttonStyle(choice.style))
    .setLabel(cutLabel(choice.label))
    .setCustomId(encodeChoice(questionId, choice.id));
}

function buttonStyle(style: Choice["style"]): ButtonStyle {
  if (style === "primary") return ButtonStyle.Primary;
  if (style === "danger") return ButtonStyle.Danger;
  return ButtonStyle.Secondary;
}

/** Discord rejects the whole message for one label over 80 characters (or an empty one). */
function cutLabel(label: string): string {
  const text = label.trim() || "?";
  return text.length > MAX_LABEL_CHARS ? `${text.slice(0, MAX_LABEL_CHARS - 1)}…` : text;
}

/** A button press, as views.ts reads it from discord.js's ButtonInteraction. */
export interface DiscordButtonView extends DiscordPlaceView {
  customId: string;
  user: DiscordUserView;
}

/**
 * The click for the question desk; undefined when the button is not one of ours (its custom_id is
 * not `q:<question>:<choice>`). chatId is the channel the press happened in, as for messages.
 */
export function toChoiceClick(view: DiscordButtonView): ChoiceClick | undefined {
  const choice = decodeChoice(view.customId);
  if (!choice) return undefined;
  const sender = senderMetadata(view.user);
  return {
    channel: CHANNEL,
    chatId: view.channelId,
    senderId: view.user.id,
    senderAliases: sender.senderAliases,
    questionId: choice.questionId,
    choiceId: choice.choiceId,
    ...threadOf(view),
    metadata: { ...placeMetadata(view), senderName: sender.senderName },
  };
}
