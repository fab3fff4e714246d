/**
 * The gateway's JSON API (src/channels/web/protocol.ts) as typed calls. Same origin, so the
 * session cookie from `login` goes with every request and the browser sets `Origin` on POSTs.
 */
import type {
  ChooseRequest,
  ChooseResult,
  ConversationSummary,
  HistoryMessage,
  LoginRequest,
  Me,
  SendAccepted,
  SendRequest,
  UploadResult,
  UsageView,
} from "../../src/channels/web/protocol.js";

/** A response that was not 2xx; `status` 401 means the token is missing or wrong. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
    this.name = "ApiError";
  }
}

/** Called once for any 401, so the page can show where the token is. */
let onUnauthorized: () => void = () => undefined;

export function whenUnauthorized(fn: () => void): void {
  onUnauthorized = fn;
}

async function request(method: string, path: string, body?: BodyInit, type?: string): Promise<Response> {
  const headers: Record<string, string> = { accept: "application/json" };
  if (type) headers["content-type"] = type;
  const res = await fetch(path, { method, headers, body, credentials: "same-origin" });
  if (res.ok) return res;
  if (res.status === 401) onUnauthorized();
  throw new ApiError(res.status, await errorText(res));
}

/** The server's own words when it gave any ({ error } JSON or text), else the status line. */
async function errorText(res: Response): Promise<string> {
  const text = await res.text().catch(() => "");
  try {
    const parsed = JSON.parse(text) as { error?: unknown; message?: unknown };
    const message = parsed.error ?? parsed.message;
    if (typeof message === "string") return message;
  } catch {
    // not JSON: the text itself, if short enough to be a message
  }
  return text && text.length < 300 ? text : `${res.status} ${res.statusText}`;
}

async function json<T>(method: string, path: string, body?: unknown): Promise<T> {
  const res = await request(
    method,
    path,
    body === undefined ? undefined : JSON.stringify(body),
    body === undefined ? undefined : "application/json",
  );
  return (await res.json()) as T;
}

const conv = (id: string) => `/api/conversations/${encodeURIComponent(id)}`;

export const api = {
  async login(token: string): Promise<void> {
    const body: LoginRequest = { token };
    await request("POST", "/api/login", JSON.stringify(body), "application/json");
  },
  me: () => json<Me>("GET", "/api/me"),
  conversations: () => json<ConversationSummary[]>("GET", "/api/conversations"),
  newConversation: () => json<ConversationSummary>("POST", "/api/conversations"),
  history: (id: string) => json<HistoryMessage[]>("GET", `${conv(id)}/messages`),
  send: (id: string, body: SendRequest) => json<SendAccepted>("POST", `${conv(id)}/messages`, body),
  async stop(id: string): Promise<void> {
    await request("POST", `${conv(id)}/stop`);
  },
  async upload(file: File): Promise<UploadResult> {
    const res = await request(
      "POST",
      `/api/uploads?name=${encodeURIComponent(file.name)}`,
      file,
      file.type || "application/octet-stream",
    );
    return (await res.json()) as UploadResult;
  },
  choose: (questionId: string, choiceId: string) =>
    json<ChooseResult>("POST", `/api/questions/${encodeURIComponent(questionId)}`, {
      choiceId,
    } satisfies ChooseRequest),
  usage: (id: string) => json<UsageView>("GET", `/api/usage?conversation=${encodeURIComponent(id)}`),
  fileUrl: (fileId: string) => `/api/files/${encodeURIComponent(fileId)}`,
};
