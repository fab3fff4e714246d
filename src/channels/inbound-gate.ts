/**
 * What a channel receives, on its way to the bus: the access policy first (allowFrom, pairing),
 * asked once per message by the inbound path (inbound.ts); a refused stranger gets at most a
 * rate-limited refusal notice and causes nothing else; an allowed message is journaled (a
 * platform's duplicate delivery stops there), then put on the bus, unless palaver is shutting down. Button presses are checked the same way before the question desk sees them.
 * The ChannelManager hands each running channel the InboundSink `sinkFor` makes.
 */
import type { MessageBus } from "../bus/bus.js";
import type { InboundMessage, OutboundMessage } from "../bus/types.js";
import { replyPlaceOf } from "../bus/types.js";
import type { Journal } from "../daemon/journal.js";
import type { Logger } from "../log.js";
import { isSenderAllowed } from "../config/allow-from.js";
import { refusalNotice, type AccessPolicy, type NoticeLimiter } from "./access.js";
import type { ChoiceClick, ChoiceOutcome, InboundReservation, InboundSink, QuestionDesk } from "./types.js";

export interface InboundGateOptions {
  bus: MessageBus;
  access: AccessPolicy;
  notices: NoticeLimiter;
  log: Logger;
  journal?: Journal;
  questions?: QuestionDesk;
  /** False while shutting down: what arrives then waits in the journal for the next start. */
  intakeOpen(): boolean;
  /** Sends a notice (a refusal, a pairing code) into the sender's chat, in the chat's order. */
  notify(msg: OutboundMessage): void;
  /** Cluster mode: resolves once what was published is stored in the cluster (InboundSink.stored). */
  stored?: (msg?: InboundMessage) => Promise<void>;
}

export class InboundGate {
  constructor(private readonly opts: InboundGateOptions) {}

  /** The sink for channel `name`, whose own config lets `allowFrom` in. */
  sinkFor(name: string, allowFrom: readonly string[]): InboundSink {
    return {
      allows: (msg) => this.opts.access.allows(name, msg, allowFrom),
      publishInbound: (msg) => this.admit(name, msg),
      refuse: (msg) => this.refuse(name, msg),
      reserve: (msg) => this.reserve(name, msg),
      choose: (click) => this.choose(name, allowFrom, click),
      left: (senderId) => this.opts.access.senderLeft?.(name, senderId),
      ...(this.opts.stored ? { stored: this.opts.stored } : {}),
    };
  }

  /** A button press: strangers are refused here, before the question desk sees it. */
  private choose(name: string, allowFrom: readonly string[], click: ChoiceClick): ChoiceOutcome {
    if (
      !isSenderAllowed(click.senderId, click.senderAliases ?? [], allowFrom) &&
      !this.opts.access.allowsSender(name, click.senderId)
    )
      return { accepted: false, notice: "You are not allowed to answer this." };
    return (
      this.opts.questions?.choose(click) ?? { accepted: false, notice: "This question is no longer open." }
    );
  }

  private admit(name: string, msg: InboundMessage): void {
    const journal = this.opts.journal;
    const id = journal ? journal.recordInbound(msg) : undefined;
    if (id === null) {
      this.opts.log.info(
        { channel: name, chatId: msg.chatId, messageId: msg.messageId },
        "duplicate delivery ignored",
      );
      return;
    }
    this.publishAdmitted(name, msg, id);
  }

  private publishAdmitted(name: string, msg: InboundMessage, journalId: string | undefined): void {
    if (!this.opts.intakeOpen()) {
      // Journaled, so the next start answers it; without a journal it is lost, and we say so.
      this.opts.log.warn(
        { channel: name, chatId: msg.chatId, kept: journalId !== undefined },
        "message arrived while shutting down",
      );
      return;
    }
    this.opts.bus.publishInbound(journalId ? { ...msg, journalId } : msg);
  }

  /**
   * Journals a message that is not complete yet (files downloading, queued
   * behind another): if palaver dies before it is published, the next start
   * answers the message as it was reserved. Publishing later replaces the entry.
   */
  private reserve(name: string, reserved: InboundMessage): InboundReservation {
    const journal = this.opts.journal;
    if (!journal) return { publish: (msg) => this.admit(name, msg), cancel: () => undefined };
    // Journaled as given: the inbound path (inbound.ts) puts a note in place of files still downloading.
    const id = journal.recordInbound(reserved);
    return {
      publish: (msg) => {
        if (id === null) {
          this.opts.log.info({ channel: name, chatId: msg.chatId }, "duplicate delivery ignored");
          return;
        }
        journal.updateInbound(id, msg);
        this.publishAdmitted(name, msg, id);
      },
      cancel: () => {
        if (id !== null) journal.markDone(id);
      },
    };
  }

  private refuse(name: string, msg: InboundMessage): void {
    const notify = this.opts.notices.shouldNotify(name, msg.senderId);
    this.opts.log.warn(
      { channel: name, senderId: msg.senderId, chatId: msg.chatId, notified: notify },
      "refused sender",
    );
    if (!notify) return;
    // Pairing (the access policy) may answer with a code instead, or not at all.
    const content = this.opts.access.refusal(name, msg);
    if (content instanceof Promise) {
      content.then(
        (text) => this.sendRefusal(name, msg, text),
        (err: unknown) => this.opts.log.warn({ err, channel: name }, "refusal notice failed"),
      );
    } else {
      this.sendRefusal(name, msg, content);
    }
  }

  private sendRefusal(name: string, msg: InboundMessage, content: string | null | undefined): void {
    if (content !== null) {
      this.opts.notify({
        channel: name,
        chatId: msg.chatId,
        content: content ?? refusalNotice(name, msg.senderId),
        // The thread it was said in; a Discord slash command's interaction is answered by it.
        ...replyPlaceOf(msg),
        metadata: msg.metadata,
      });
    }
  }
}
