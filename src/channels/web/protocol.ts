/**
 * The web chat's wire contract: the JSON API and the server-sent events between the gateway
 * (src/channels/web/) and the page (web/). Types only, so the page's bundle imports it for free.
 *
 * Everything is served by the gateway's HTTP server (gateway.host:gateway.port, loopback by
 * default). Public: `GET /` (the page shell) and `GET /assets/<name>.<hash>.<ext>` (immutable,
 * compressed). Everything under `/api/` needs the session cookie `palaver_web` (HttpOnly,
 * SameSite=Strict, set by `POST /api/login`) or `Authorization: Bearer <token>`; without it: 401
 * (JSON for fetches, the "where is my token" page for a navigation). Every POST must also come
 * from the page's own origin (`Origin` equal to the server's, or the Bearer header): no CSRF.
 *
 *   POST /api/login                          LoginRequest → 204 + Set-Cookie | 401 | 429 (ten wrong
 *                                            tokens a minute from one address, Bearer ones included)
 *   GET  /api/me                             → Me | 401
 *   GET  /api/conversations                  → ConversationSummary[] (newest first)
 *   POST /api/conversations                  → ConversationSummary (a new, empty conversation)
 *   GET  /api/conversations/:id/messages     → HistoryMessage[] (from the session file)
 *   POST /api/conversations/:id/messages     SendRequest → 202 SendAccepted
 *   POST /api/conversations/:id/stop         → 202 (the chat's /stop)
 *   POST /api/uploads?name=<file name>       raw body (≤ limits.uploadBytes) → 201 UploadResult |
 *                                            413 (too large, or the unsent uploads' quota) | 429
 *   GET  /api/files/:fileId                  a file the agent sent (Content-Disposition: attachment)
 *   POST /api/questions/:questionId          ChooseRequest → 200 ChooseResult
 *   GET  /api/usage?conversation=:id         → UsageView (this conversation today and this month;
 *                                            the whole bot this month when the page's sender is an
 *                                            owner, as /usage says it)
 *   GET  /api/events?conversation=:id        text/event-stream of WebEvent (one `data:` JSON per
 *                                            event, `event:` = its type); every tab on a
 *                                            conversation gets every event of it
 *
 * A conversation id is [a-z0-9]{1,32}; its session key is `web:<id>` (chatId = id).
 */

export interface LoginRequest {
  token: string;
}

export interface Me {
  /** What the assistant calls itself in the page's title. */
  name: string;
  /** The model answering, for the header. */
  model: string;
  limits: Limits;
}

export interface Limits {
  /** Longest message text accepted, in characters. */
  messageChars: number;
  /** Largest upload, in bytes. */
  uploadBytes: number;
}

export interface ConversationSummary {
  id: string;
  /** The first user message, shortened; "New chat" while empty. */
  title: string;
  /** ISO time of the last message (or of creation). */
  updatedAt: string;
  /** A turn is running in it now (the page shows Stop). */
  busy: boolean;
}

export interface HistoryMessage {
  role: "user" | "assistant";
  /** Markdown (assistant) or plain text (user). */
  content: string;
  /** ISO time, when the session recorded one. */
  at?: string;
  /** Files the message carried: uploads (user) or files the agent sent (assistant). */
  files?: FileRef[];
}

export interface FileRef {
  /** For `GET /api/files/:id` (agent files) — absent for a user's own upload. */
  id?: string;
  name: string;
  bytes?: number;
}

export interface SendRequest {
  text: string;
  /** Ids from `POST /api/uploads`. */
  uploads?: string[];
}

export interface SendAccepted {
  /** The id the user's message has in the events (echoed in `user`). */
  messageId: string;
}

export interface UploadResult {
  id: string;
  name: string;
  bytes: number;
}

export interface ChooseRequest {
  choiceId: string;
}

export interface ChooseResult {
  accepted: boolean;
  notice: string;
}

/** One event on `GET /api/events`. `turnId` ties the events of one turn together. */
export type WebEvent =
  /** Someone (this tab or another) sent a message in this conversation. */
  | { type: "user"; conversationId: string; messageId: string; text: string; files?: FileRef[] }
  | { type: "turnStart"; conversationId: string; turnId: string }
  /** Model text before tool calls, and tool hints (`read_file("notes.md")`): shown quietly. */
  | { type: "progress"; conversationId: string; turnId?: string; text: string }
  | { type: "toolHint"; conversationId: string; turnId?: string; text: string }
  /** The reply so far while it is written (`text` is the whole text so far, markdown). */
  | { type: "delta"; conversationId: string; turnId?: string; text: string }
  /**
   * The turn's plan (todo_write) as it stands: one line per item, "☐ " pending, "▶ " in progress,
   * "☑ " done. It replaces the turn's earlier plan, in place; the last one stays after turnEnd.
   */
  | { type: "plan"; conversationId: string; turnId: string; text: string }
  /** A reply, once: it replaces the turn's delta text. Also a cron reminder or a subagent report. */
  | { type: "final"; conversationId: string; turnId?: string; text: string; files?: FileRef[] }
  /** A question with buttons (approvals, ask_human). */
  | {
      type: "question";
      conversationId: string;
      turnId?: string;
      questionId: string;
      text: string;
      choices: { id: string; label: string; style?: "primary" | "danger" }[];
    }
  /** A question was answered or expired: its text becomes `text`, its buttons go. */
  | { type: "questionClosed"; conversationId: string; questionId: string; text: string }
  /** `stopped`: /stop ended the turn (the partial text stays, marked stopped). */
  | { type: "turnEnd"; conversationId: string; turnId: string; outcome: "done" | "stopped" | "failed" }
  /** Sent every 25 s so proxies keep the stream open (the page ignores it). */
  | { type: "ping" };

export type WebEventType = WebEvent["type"];

/** One sum of LLM calls as /usage adds them up; `text` is how /usage words it. */
export interface UsageFigures {
  calls: number;
  promptTokens: number;
  completionTokens: number;
  cachedTokens: number;
  reasoningTokens: number;
  /** USD of the calls whose model has a price. */
  costUsd: number;
  /** Calls whose model has no price (counted in tokens only). */
  unpricedCalls: number;
  /** Calls whose counts were estimated. */
  estimatedCalls: number;
  /** "3 calls, 1200 tokens in (400 cached), 80 out, $0.0123" */
  text: string;
}

export interface UsageGroupFigures extends UsageFigures {
  /** The kind of work ("chat", "heartbeat", ...) or the model. */
  key: string;
}

export interface UsageView {
  conversation: { today: UsageFigures; month: UsageFigures };
  /** Only when the page's sender is an owner (channels.web.allowFrom or admins): the whole bot this month. */
  bot?: { month: UsageFigures; byKind: UsageGroupFigures[]; byModel: UsageGroupFigures[] };
}
