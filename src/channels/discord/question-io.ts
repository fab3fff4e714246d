/**
 * Questions on Discord, the calls: a question posted with its buttons under its last part, an
 * "edit" that rewrites it and takes the buttons away, and a press handed to the sink's `choose`
 * with its notice shown to the presser alone (an ephemeral interaction reply). What the buttons
 * look like and what a press means is decided in questions.ts, without network.
 */
import { MessageFlags, type ButtonInteraction } from "discord.js";
import type { OutboundMessage } from "../../bus/types.js";
import type { Logger } from "../../log.js";
import { BoundedMap } from "../../util/bounded-map.js";
import { ChannelError } from "../../util/errors.js";
import { choicesAsText } from "../questions.js";
import type { ChoiceClick, ChoiceOutcome, InboundSink, SentMessage } from "../types.js";
import { discordChunks, outgoingMessages } from "./format.js";
import { CHANNEL } from "./mapping.js";
import { questionComponents, toChoiceClick } from "./questions.js";
import { outgoing, type DiscordSender } from "./send.js";
import { buttonView } from "./views.js";

/** Where recent questions were posted, for an "edit" that names only the question. */
const MAX_QUESTION_REFS = 500;
const NOT_ANSWERABLE = "This can't be answered here.";

export class DiscordQuestions {
  /** Question id → id of the message carrying its buttons. */
  private readonly refs = new BoundedMap<string, string>(MAX_QUESTION_REFS);

  constructor(
    private readonly sender: DiscordSender,
    private readonly log: Logger,
  ) {}

  /**
   * Posts a question, formatted like a reply, with its buttons under the last part; that part's id is
   * the ref. Always a channel message, never a slash command's deferred answer: an edit then reaches
   * it by channel and id whatever became of the interaction (its token dies after 15 minutes).
   */
  async ask(msg: OutboundMessage): Promise<SentMessage> {
    const question = msg.question;
    if (!question) {
      throw new ChannelError("a question without its choices (msg.question)", {
        platform: CHANNEL,
        method: "createMessage",
        permanent: true,
      });
    }
    const text = msg.content.trim() ? msg.content : choicesAsText(question);
    const messages = await outgoing(text, msg.media ?? []);
    const ids = await this.sender.toChannel(msg.chatId, messages, {
      components: questionComponents(question),
    });
    const ref = ids[ids.length - 1]!;
    this.refs.set(question.id, ref);
    return { ref };
  }

  /**
   * Rewrites a question's message and takes its buttons away: the ref the edit names (known after a
   * restart), else the one remembered for its question; with neither, the text goes as a new message.
   */
  async edit(msg: OutboundMessage): Promise<void> {
    const target = msg.edit;
    const ref = target?.ref ?? (target ? this.refs.get(target.questionId) : undefined);
    const chunks = discordChunks(msg.content);
    if (!ref) {
      if (chunks.length > 0) await this.sender.toChannel(msg.chatId, outgoingMessages(chunks, []));
      return;
    }
    await this.sender.editMessage(msg.chatId, ref, chunks[0]);
    // Longer than one message: the rest follows under it.
    if (chunks.length > 1) await this.sender.toChannel(msg.chatId, outgoingMessages(chunks.slice(1), []));
  }

  /**
   * A button press. Access is the sink's business (the manager refuses strangers); here the press is
   * handed over and the notice shown to the presser alone. Discord wants an answer within 3 s, which
   * `choose`, synchronous, allows. `sink` is null while the channel is stopped.
   */
  async press(interaction: ButtonInteraction, sink: InboundSink | null): Promise<void> {
    const click = toChoiceClick(buttonView(interaction));
    const outcome = click ? this.choose(click, sink) : undefined;
    if (!outcome?.notice) {
      // Not one of ours (a button of an older version), or nothing to say: acknowledged without a
      // word, so Discord does not show "This interaction failed".
      if (!click) this.log.debug({ customId: interaction.customId }, "button press ignored: not a question");
      await this.sender
        .call("deferUpdate", () => interaction.deferUpdate())
        .catch((err: unknown) => this.log.warn({ err }, "could not acknowledge a button press"));
      return;
    }
    await this.sender
      .call("interactionReply", () =>
        interaction.reply({ content: outcome.notice, flags: MessageFlags.Ephemeral }),
      )
      .catch((err: unknown) => this.log.warn({ err }, "could not answer a button press"));
  }

  private choose(click: ChoiceClick, sink: InboundSink | null): ChoiceOutcome {
    if (!sink?.choose) return { accepted: false, notice: NOT_ANSWERABLE };
    try {
      const outcome = sink.choose(click);
      this.log.debug(
        {
          questionId: click.questionId,
          choiceId: click.choiceId,
          senderId: click.senderId,
          accepted: outcome.accepted,
        },
        "button pressed",
      );
      return outcome;
    } catch (err) {
      this.log.error({ err, questionId: click.questionId }, "answering a button press failed");
      return { accepted: false, notice: "Something went wrong; please try again." };
    }
  }
}
