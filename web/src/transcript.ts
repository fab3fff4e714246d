/**
 * The conversation shown: its history, then live events. A turn's answer streams into one
 * article (re-rendered at most once per frame), progress and tool hints go quietly above it, the
 * plan is one checklist in it, rewritten in place as items change, and the final replaces the
 * streamed text. A question asked during a turn splits it: the rest of the turn continues in a new
 * article below the card. The log region is polite and a streaming answer is
 * aria-busy, so a screen reader reads each answer once, when it is complete.
 */
import type { FileRef, HistoryMessage, WebEvent } from "../../src/channels/web/protocol.js";
import { api } from "./api.js";
import { h } from "./dom.js";
import { perFrame } from "./frame.js";
import { formatBytes } from "./format.js";
import { handleCopyClick, renderMarkdown } from "./render.js";

type QuestionEvent = Extract<WebEvent, { type: "question" }>;

interface Turn {
  article: HTMLElement;
  body: HTMLElement;
  hints: HTMLElement;
  plan: HTMLElement;
  text: string;
  final: boolean;
  paint: { schedule(): void; cancel(): void };
}

export interface TranscriptOptions {
  /** A turn started or ended in the conversation shown. */
  onBusy(busy: boolean): void;
  /** A choice failed or was refused: said in the status line. */
  onNotice(text: string): void;
}

export class Transcript {
  private readonly turns = new Map<string, Turn>();
  /** Checklists of turns split by a question: still the one plan, rewritten where it was first shown. */
  private readonly plansAbove = new Map<string, HTMLElement>();
  private readonly running = new Set<string>();
  /** Ids of user messages shown, so the echo of this tab's own message is not shown twice. */
  private readonly shownUsers = new Set<string>();

  constructor(
    private readonly root: HTMLElement,
    private readonly opts: TranscriptOptions,
  ) {
    root.addEventListener("click", handleCopyClick);
  }

  clear(): void {
    for (const turn of this.turns.values()) turn.paint.cancel();
    this.turns.clear();
    this.running.clear();
    this.shownUsers.clear();
    this.root.replaceChildren();
  }

  showHistory(messages: HistoryMessage[]): void {
    this.clear();
    for (const m of messages) {
      if (m.role === "user") this.append(userArticle(m.content, m.files));
      else this.append(assistantArticle(m.content, m.files).article);
    }
    this.scrollToEnd(true);
  }

  /** This tab's message, shown at once; `confirm` gives it the server's id when the POST answers. */
  addOwnMessage(text: string, files: FileRef[]): { confirm(messageId: string): void; fail(): void } {
    const article = userArticle(text, files);
    article.classList.add("pending");
    this.append(article);
    this.scrollToEnd(true);
    return {
      confirm: (messageId) => {
        article.classList.remove("pending");
        if (article.dataset.id) return; // its event came first and was matched to it
        // Its event came first but was shown on its own (the server changed the text): keep that one.
        if (this.shownUsers.has(messageId)) article.remove();
        else this.shownUsers.add(messageId);
        article.dataset.id = messageId;
      },
      fail: () => {
        article.classList.remove("pending");
        article.classList.add("failed");
      },
    };
  }

  apply(event: WebEvent): void {
    switch (event.type) {
      case "user":
        if (this.shownUsers.has(event.messageId)) return;
        this.shownUsers.add(event.messageId);
        // This tab's own message whose POST has not answered yet: already shown.
        if (this.matchOwnPending(event.messageId, event.text)) return;
        this.append(userArticle(event.text, event.files));
        break;
      case "turnStart":
        this.running.add(event.turnId);
        this.turn(event.turnId);
        this.opts.onBusy(true);
        break;
      case "progress":
      case "toolHint":
        this.hint(event.turnId, event.text);
        break;
      case "plan":
        this.showPlan(event.turnId, event.text);
        break;
      case "delta": {
        const turn = this.turn(event.turnId);
        if (turn.final) return;
        turn.text = event.text;
        turn.paint.schedule();
        break;
      }
      case "final":
        this.final(event.turnId, event.text, event.files);
        break;
      case "question":
        this.append(this.questionArticle(event));
        // Approval questions name no turn: the one running here asked (one turn at a time per conversation).
        for (const turnId of event.turnId ? [event.turnId] : [...this.running]) this.continueBelow(turnId);
        break;
      case "questionClosed":
        this.closeQuestion(event.questionId, event.text);
        break;
      case "turnEnd":
        this.endTurn(event.turnId, event.outcome);
        break;
      case "ping":
        return;
    }
    this.scrollToEnd(false);
  }

  private matchOwnPending(messageId: string, text: string): boolean {
    for (const el of Array.from(this.root.querySelectorAll<HTMLElement>("article.user.pending"))) {
      if (el.dataset.text === text && !el.dataset.id) {
        el.dataset.id = messageId;
        return true;
      }
    }
    return false;
  }

  /** The turn's article, made on first use; events without a turn id get one of their own. */
  private turn(turnId: string | undefined): Turn {
    const existing = turnId ? this.turns.get(turnId) : undefined;
    if (existing) return existing;
    const { article, body, hints, plan } = assistantArticle("");
    article.classList.add("streaming");
    article.setAttribute("aria-busy", "true");
    const turn: Turn = {
      article,
      body,
      hints,
      plan,
      text: "",
      final: false,
      paint: perFrame(() => {
        body.replaceChildren(renderMarkdown(turn.text));
        this.scrollToEnd(false);
      }),
    };
    if (turnId) this.turns.set(turnId, turn);
    this.append(article);
    return turn;
  }

  /**
   * A question was asked in a running turn: what the turn says after it goes into a new article
   * below the card, so the card (and, once answered, the decision) stays where it was asked instead
   * of ending up under the answer. What came before stays above it.
   */
  private continueBelow(turnId: string): void {
    const turn = this.turns.get(turnId);
    if (!turn || turn.final) return;
    this.turns.delete(turnId);
    turn.paint.cancel();
    if (turn.text) turn.body.replaceChildren(renderMarkdown(turn.text));
    settle(turn.article);
    if (!turn.plan.hidden) this.plansAbove.set(turnId, turn.plan);
    else if (!turn.text && turn.hints.hidden) turn.article.remove(); // nothing said before the question
  }

  private hint(turnId: string | undefined, text: string): void {
    const turn = this.turn(turnId);
    turn.hints.hidden = false;
    turn.hints.append(h("li", {}, text));
  }

  /** The turn's checklist, replaced whole: one item per line, its mark first. */
  private showPlan(turnId: string, text: string): void {
    const plan = this.plansAbove.get(turnId) ?? this.turn(turnId).plan;
    plan.hidden = false;
    plan.replaceChildren(
      ...text.split("\n").map((line) => {
        const mark = line.slice(0, 1);
        const state = mark === "☑" ? "done" : mark === "▶" ? "doing" : "todo";
        return h("li", { class: state }, line);
      }),
    );
  }

  private final(turnId: string | undefined, text: string, files: FileRef[] | undefined): void {
    // A final of a turn already answered (a reminder, a message tool call) is a new article.
    const current = turnId ? this.turns.get(turnId) : undefined;
    const turn = current && !current.final ? current : this.turn(undefined);
    turn.paint.cancel();
    turn.final = true;
    turn.text = text;
    turn.body.replaceChildren(renderMarkdown(text));
    if (files?.length) turn.article.append(fileList(files));
    settle(turn.article);
    if (turnId && !current) this.turns.set(turnId, turn);
  }

  private endTurn(turnId: string, outcome: "done" | "stopped" | "failed"): void {
    this.running.delete(turnId);
    this.plansAbove.delete(turnId);
    const turn = this.turns.get(turnId);
    if (turn) {
      turn.paint.cancel();
      if (!turn.final && turn.text) turn.body.replaceChildren(renderMarkdown(turn.text));
      settle(turn.article);
      if (outcome !== "done") {
        turn.article.classList.add(outcome);
        turn.article.append(h("p", { class: "outcome" }, outcome === "stopped" ? "(stopped)" : "(failed)"));
      } else if (!turn.final && !turn.text && turn.hints.hidden && turn.plan.hidden) {
        turn.article.remove(); // a turn that said nothing (e.g. the reply went elsewhere)
      }
    }
    if (this.running.size === 0) this.opts.onBusy(false);
  }

  private questionArticle(q: QuestionEvent): HTMLElement {
    const buttons = q.choices.map((c) =>
      h("button", { type: "button", class: `choice ${c.style ?? ""}`.trim(), "data-choice": c.id }, c.label),
    );
    const article = h(
      "article",
      { class: "msg question", "data-question": q.questionId, "aria-label": "Question" },
      h("div", { class: "body" }, renderMarkdown(q.text)),
      h("div", { class: "choices", role: "group", "aria-label": "Answers" }, ...buttons),
    );
    for (const button of buttons) {
      button.addEventListener("click", () => {
        const choiceId = button.dataset.choice ?? "";
        for (const b of buttons) b.disabled = true;
        api.choose(q.questionId, choiceId).then(
          (result) => {
            if (result.accepted) return; // questionClosed follows and says what was chosen
            this.opts.onNotice(result.notice);
            for (const b of buttons) b.disabled = false;
          },
          (err: unknown) => {
            this.opts.onNotice(`Could not answer: ${err instanceof Error ? err.message : String(err)}`);
            for (const b of buttons) b.disabled = false;
          },
        );
      });
    }
    return article;
  }

  private closeQuestion(questionId: string, text: string): void {
    const article = this.root.querySelector<HTMLElement>(
      `article[data-question="${CSS.escape(questionId)}"]`,
    );
    if (!article) return;
    article.classList.add("closed");
    article.replaceChildren(h("div", { class: "body" }, renderMarkdown(text)));
  }

  private append(el: HTMLElement): void {
    this.root.append(el);
  }

  /** Follows the end of the conversation unless the reader scrolled up to read (or `force`). */
  private scrollToEnd(force: boolean): void {
    const el = this.root;
    const nearEnd = el.scrollHeight - el.scrollTop - el.clientHeight < 120;
    if (force || nearEnd) el.scrollTop = el.scrollHeight;
  }
}

function settle(article: HTMLElement): void {
  article.classList.remove("streaming");
  article.removeAttribute("aria-busy");
}

function userArticle(text: string, files: FileRef[] | undefined): HTMLElement {
  const article = h(
    "article",
    { class: "msg user", "aria-label": "You" },
    h("div", { class: "body" }, text),
    files?.length ? fileList(files) : null,
  );
  article.dataset.text = text;
  return article;
}

function assistantArticle(
  markdown: string,
  files?: FileRef[],
): { article: HTMLElement; body: HTMLElement; hints: HTMLElement; plan: HTMLElement } {
  const hints = h("ul", { class: "hints", "aria-label": "Progress" });
  hints.hidden = true;
  const plan = h("ul", { class: "plan", "aria-label": "Plan" });
  plan.hidden = true;
  const body = h("div", { class: "body" }, markdown ? renderMarkdown(markdown) : null);
  const article = h(
    "article",
    { class: "msg assistant", "aria-label": "Assistant" },
    hints,
    plan,
    body,
    files?.length ? fileList(files) : null,
  );
  return { article, body, hints, plan };
}

/** Files of a message: the agent's are download links, a user's own uploads just their names. */
function fileList(files: FileRef[]): HTMLElement {
  return h(
    "ul",
    { class: "files", "aria-label": "Files" },
    ...files.map((f) =>
      h(
        "li",
        {},
        f.id ? h("a", { href: api.fileUrl(f.id), download: f.name }, f.name) : f.name,
        f.bytes === undefined ? null : h("span", { class: "size" }, ` ${formatBytes(f.bytes)}`),
      ),
    ),
  );
}
