import type { InboundMessage, OutboundMessage, ReplyPlace, TurnEvent } from "../bus/types.js";

/** Where a channel puts what it receives. The manager hands each channel one that checks access first. */
export interface InboundSink {
  /**
   * Whether this sender may talk to the bot here: asked once per message (channels/inbound.ts does),
   * before any download, reaction or typing indicator. The answer sends the message either to
   * `publishInbound` / `reserve` (allowed) or to `refuse`, never both.
   */
  allows(msg: InboundMessage): boolean;
  /** A message `allows` let in: journaled, then on the bus. It does not ask `allows` again. */
  publishInbound(msg: InboundMessage): void;
  /**
   * Resolves once `msg` (without one: everything published so far) is kept beyond this process
   * (cluster mode: stored in the cluster's queue, where another instance finds it if this one
   * dies). A platform whose acknowledgement can wait awaits it before acknowledging: Telegram's
   * getUpdates offset a whole batch, a Slack event or a web chat POST its own message. Absent: the
   * local journal's synchronous write is that point.
   */
  stored?(msg?: InboundMessage): Promise<void>;
  /**
   * A message `allows` refused: it causes nothing but the (rate-limited) refusal notice or the
   * pairing code the access policy answers with.
   */
  refuse(msg: InboundMessage): void;
  /**
   * For an allowed message that needs slow work (downloads) before it can be published:
   * journals it now, so it survives a crash even though the platform is
   * acknowledged before the work is done. Publish the finished message through
   * the returned reservation.
   */
  reserve?(msg: InboundMessage): InboundReservation;
  /**
   * Someone pressed a button under a question (see `Question`). Adapters call this for every press
   * and show `notice` to the presser alone (Telegram answerCallbackQuery text, a Discord ephemeral
   * interaction reply, a Slack ephemeral message after the ack Slack wants within 3 s).
   * Synchronous: the answer is decided at once.
   */
  choose?(click: ChoiceClick): ChoiceOutcome;
  /**
   * A person closed their direct chat with the bot (blocked it, left it), as far as the platform
   * tells: a pending pairing code of theirs is dropped. Never a message: no journal, no reply.
   */
  left?(senderId: string): void;
}

/** A button press: who pressed which choice of which question, in which chat. */
export interface ChoiceClick extends ReplyPlace {
  channel: string;
  chatId: string;
  senderId: string;
  /** Other names of the presser (a Telegram @username), matched against allowFrom and approvers. */
  senderAliases?: string[];
  questionId: string;
  choiceId: string;
  /** What only the channel reads, as on inbound messages. */
  metadata?: Record<string, unknown>;
}

export interface ChoiceOutcome {
  /** Whether the press answered the question (false: a stranger, a non-approver, a closed question). */
  accepted: boolean;
  /** Shown to the presser alone. */
  notice: string;
}

/** What a channel's send says about the message it delivered. */
export interface SentMessage {
  /**
   * The platform's id of the message that carries a question's buttons (Telegram message_id,
   * Slack ts, Discord message id): an "edit" names it.
   */
  ref: string;
}

/** The agent side of questions, as the channel manager sees it (approvals/questions.ts implements it). */
export interface QuestionDesk {
  /** A question's message was delivered: where it is, so it can be rewritten after a restart too. */
  delivered(questionId: string, ref: string): void;
  /** A press, already known to come from a sender allowed in that channel. */
  choose(click: ChoiceClick): ChoiceOutcome;
}

export interface InboundReservation {
  publish(msg: InboundMessage): void;
  /** The message turned out not to be for the agent after all (e.g. an album nobody mentioned the bot in). */
  cancel(): void;
}

/** One chat platform. docs/architecture.md describes the path of a message through it. */
export interface Channel {
  readonly name: string;
  /** Connects and starts publishing inbound messages; resolves once running, rejects when it cannot connect. */
  start(bus: InboundSink, signal: AbortSignal): Promise<void>;
  stop(): Promise<void>;
  /**
   * Delivers one message. Rejects with a ChannelError whose `permanent` says whether trying again
   * can ever succeed (the outbox drops permanent failures at once and retries the others).
   * For kind "question" it returns the ref of the message that carries the buttons.
   */
  send(msg: OutboundMessage): Promise<SentMessage | void>;
  /**
   * Waits for what must land before a message to this chat goes out (a typing call still in
   * flight). In cluster mode a final reply is claimed after this and sent right after the claim,
   * so an instance that dies in between loses as little as can be (docs/cluster.md, "When
   * something fails").
   */
  readyToSend?(msg: OutboundMessage): Promise<void>;
  /** A turn in one of this channel's chats started or ended: typing indicators, receipt reactions. */
  onTurn?(event: TurnEvent): void;
  /**
   * Where a streamed reply to this chat is shown while it is written (channels/live-preview.ts drives
   * it); undefined when this chat cannot show one (the manager then sends only the final).
   */
  previewSurface?(target: PreviewTarget): PreviewSurface | undefined;
  /**
   * Where the turn's plan (an OutboundMessage of kind "plan") is shown: a message of its own that
   * stays (never a draft, never erased, quoting nothing), edited in place as the checklist changes
   * (channels/turn-plans.ts drives it). Undefined, or no such method: each changed checklist comes
   * to `send` as a message (the terminal prints it).
   */
  planSurface?(target: PreviewTarget): PreviewSurface | undefined;
}

/** The chat (and turn) a live preview is for. */
export interface PreviewTarget extends ReplyPlace {
  chatId: string;
  turnId: string;
  /** The platform id of the message the reply answers (quoted when the channel's replyToMessage is on). */
  replyTo?: string;
  /** The chat's inbound metadata (what only its channel reads, such as Telegram's chat type). */
  metadata?: Record<string, unknown>;
}

/** What a platform gives the streaming engine (channels/live-preview.ts) for one reply. */
export interface PreviewSurface {
  /** The longest text one message holds. */
  readonly maxChars: number;
  /** The platform's own pace for preview updates (its edit rate limits), unless the config sets one. */
  readonly intervalMs?: number;
  /** Posts a new message; `formatted` texts come from `finalParts`, others are plain preview text. */
  post(text: string, formatted: boolean): Promise<string>;
  /** Rewrites the message `ref`. A rewrite that changes nothing must succeed. */
  edit(ref: string, text: string, formatted: boolean): Promise<void>;
  /**
   * False: the final is never written over the preview but sent as a message of its own (the web
   * chat, whose page replaces the turn's live text with its final event). Default true.
   */
  readonly finalInPlace?: boolean;
  /** The final answer as the platform would send it: formatted parts, each within its limits. */
  finalParts(content: string): string[];
  /**
   * /stop: leaves `text` (the last text shown, with a "stopped" mark) as the message `ref` for good.
   * Default: `edit(ref, text, false)`. A platform whose previews vanish on their own (Telegram
   * drafts) posts it instead.
   */
  stopped?(ref: string, text: string): Promise<void>;
}
