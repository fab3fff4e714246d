/**
 * The page: takes the token from `#token=` once (the server turns it into an HttpOnly cookie and
 * the fragment is dropped from the address bar and history), then shows the conversation named by
 * `#c=<id>` (or the newest, or a new one) and follows its events.
 */
import type {
  ConversationSummary,
  FileRef,
  HistoryMessage,
  UploadResult,
  WebEvent,
} from "../../src/channels/web/protocol.js";
import { ApiError, api, whenUnauthorized } from "./api.js";
import { Composer } from "./composer.js";
import { renderConversations } from "./conversations.js";
import { byId } from "./dom.js";
import { subscribe } from "./events.js";
import { conversationFromHash, tokenFromHash } from "./format.js";
import { Transcript } from "./transcript.js";
import { renderUsage } from "./usage.js";

const ui = {
  app: byId("app", HTMLDivElement),
  unauthorized: byId("unauthorized", HTMLElement),
  name: byId("name", HTMLHeadingElement),
  model: byId("model", HTMLSpanElement),
  menu: byId("menu", HTMLButtonElement),
  sidebar: byId("sidebar", HTMLElement),
  list: byId("conversations", HTMLUListElement),
  newChat: byId("new-chat", HTMLButtonElement),
  usageOpen: byId("usage-open", HTMLButtonElement),
  usage: byId("usage", HTMLDialogElement),
  usageBody: byId("usage-body", HTMLDivElement),
  transcript: byId("transcript", HTMLElement),
  notice: byId("notice", HTMLParagraphElement),
};

let conversations: ConversationSummary[] = [];
let current: string | undefined;
let unsubscribe: (() => void) | undefined;
let unauthorized = false;

function notice(text: string): void {
  ui.notice.textContent = text;
}

function describe(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

whenUnauthorized(() => {
  unauthorized = true;
  unsubscribe?.();
  ui.app.hidden = true;
  ui.unauthorized.hidden = false;
  document.title = "palaver: access token needed";
});

const transcript = new Transcript(ui.transcript, {
  onBusy: (busy) => composer.setBusy(busy),
  onNotice: notice,
});

const composer = new Composer(
  {
    form: byId("composer", HTMLFormElement),
    input: byId("input", HTMLTextAreaElement),
    files: byId("files", HTMLInputElement),
    attach: byId("attach", HTMLButtonElement),
    attachments: byId("attachments", HTMLUListElement),
    stop: byId("stop", HTMLButtonElement),
    dropZone: byId("main", HTMLElement),
  },
  { send, stop, notice },
);

async function send(text: string, uploads: UploadResult[]): Promise<boolean> {
  await loaded;
  const id = current;
  if (!id) return false;
  notice("");
  const files: FileRef[] = uploads.map((u) => ({ name: u.name, bytes: u.bytes }));
  const shown = transcript.addOwnMessage(text, files);
  try {
    const accepted = await api.send(id, {
      text,
      ...(uploads.length ? { uploads: uploads.map((u) => u.id) } : {}),
    });
    shown.confirm(accepted.messageId);
    return true;
  } catch (err) {
    shown.fail();
    if (!(err instanceof ApiError && err.status === 401)) notice(`Not sent: ${describe(err)}`);
    return false;
  }
}

function stop(): void {
  if (!current) return;
  api.stop(current).catch((err: unknown) => notice(`Could not stop: ${describe(err)}`));
}

/** The list again (titles, order, who is busy), at most once at a time. */
let refreshing: Promise<void> | undefined;
function refreshList(): void {
  refreshing ??= api
    .conversations()
    .then((list) => {
      conversations = list;
      renderConversations(ui.list, conversations, current);
    })
    .catch(() => undefined)
    .finally(() => (refreshing = undefined));
}

function onEvent(event: WebEvent): void {
  transcript.apply(event);
  if (event.type === "user" || event.type === "turnEnd") refreshList();
}

/** Resolves once the conversation shown has its history: a message sent before waits for it. */
let loaded: Promise<void> = Promise.resolve();

function open(id: string): Promise<void> {
  unsubscribe?.();
  current = id;
  renderConversations(ui.list, conversations, current);
  composer.setBusy(conversations.find((c) => c.id === id)?.busy ?? false);
  closeMenu();
  // Subscribed before the history is read, so nothing said in between is lost; what arrives
  // meanwhile waits and is applied after it, unless the history already ends with it.
  let early: WebEvent[] | undefined = [];
  unsubscribe = subscribe(id, {
    onEvent: (event) => (early ? early.push(event) : onEvent(event)),
    onReopen: () => void reopen(id),
    onClosed: () => void lost(),
  });
  loaded = (async () => {
    let history: HistoryMessage[] = [];
    try {
      history = await api.history(id);
    } catch (err) {
      if (!unauthorized) notice(`Could not load this conversation: ${describe(err)}`);
    }
    if (id !== current) return;
    transcript.showHistory(history);
    const waiting = early;
    early = undefined;
    for (const event of waiting) if (!endsWith(history, event)) onEvent(event);
  })();
  return loaded;
}

/** Whether the history's last message of that role is this event's message (read twice, once). */
function endsWith(history: HistoryMessage[], event: WebEvent): boolean {
  const role = event.type === "user" ? "user" : event.type === "final" ? "assistant" : undefined;
  if (!role || !("text" in event)) return false;
  for (let i = history.length - 1; i >= 0; i--) {
    if (history[i]?.role === role) return history[i]?.content === event.text;
  }
  return false;
}

/**
 * After a break in the event stream: events may have been missed, so the conversation is opened
 * afresh (a new stream, whose replay of the running turn is kept, then the history).
 */
async function reopen(id: string): Promise<void> {
  if (id !== current) return;
  notice("");
  conversations = await api.conversations().catch(() => conversations);
  await open(id);
}

async function lost(): Promise<void> {
  try {
    await api.me(); // a 401 shows the token page
    notice("Connection to palaver lost. Reload the page to reconnect.");
  } catch (err) {
    if (!unauthorized) notice(`palaver is not reachable: ${describe(err)}`);
  }
}

async function newChat(): Promise<void> {
  try {
    const created = await api.newConversation();
    conversations = [created, ...conversations.filter((c) => c.id !== created.id)];
    location.hash = `c=${created.id}`; // hashchange opens it
    composer.focus();
  } catch (err) {
    if (!unauthorized) notice(`Could not start a new chat: ${describe(err)}`);
  }
}

/** Opens the usage panel on the conversation shown, its figures fetched afresh. */
async function showUsage(): Promise<void> {
  const id = current;
  if (!id) return;
  ui.usageBody.replaceChildren("Loading…");
  if (!ui.usage.open) ui.usage.showModal();
  try {
    const view = await api.usage(id);
    if (id === current) ui.usageBody.replaceChildren(...renderUsage(view));
  } catch (err) {
    if (!unauthorized) ui.usageBody.replaceChildren(`Could not load the usage: ${describe(err)}`);
  }
}

function closeMenu(): void {
  ui.sidebar.classList.remove("open");
  ui.menu.setAttribute("aria-expanded", "false");
}

ui.menu.addEventListener("click", () => {
  const opened = ui.sidebar.classList.toggle("open");
  ui.menu.setAttribute("aria-expanded", String(opened));
});
ui.sidebar.addEventListener("keydown", (e) => {
  if (e.key !== "Escape" || !ui.sidebar.classList.contains("open")) return;
  closeMenu();
  ui.menu.focus();
});
ui.newChat.addEventListener("click", () => void newChat());
ui.usageOpen.addEventListener("click", () => void showUsage());
window.addEventListener("hashchange", () => {
  const id = conversationFromHash(location.hash);
  if (id && id !== current) void open(id);
});

async function start(): Promise<void> {
  const token = tokenFromHash(location.hash);
  if (token !== undefined) {
    // Dropped at once, whatever the answer: the token must not stay in the address bar or history.
    history.replaceState(null, "", location.pathname + location.search);
    await api.login(token); // a 401 shows the token page; anything else is said below
  }
  const me = await api.me();
  ui.name.textContent = me.name;
  ui.model.textContent = me.model;
  document.title = me.name;
  composer.setLimits(me.limits);
  conversations = await api.conversations();
  ui.app.hidden = false;
  const wanted = conversationFromHash(location.hash);
  const id = wanted ?? conversations[0]?.id;
  if (!id) {
    await newChat();
    return;
  }
  if (!wanted) history.replaceState(null, "", `#c=${id}`);
  await open(id);
  composer.focus();
}

start().catch((err: unknown) => {
  if (unauthorized) return;
  ui.app.hidden = false;
  notice(`palaver could not start the chat: ${describe(err)}`);
});
