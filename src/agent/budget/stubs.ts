/**
 * What an old tool exchange becomes when the context budget clears it: the
 * result replaced by a one-line stub saying what it was, and large string
 * arguments of its call (write_file content ...) replaced by their length.
 * Pure and memoised per message object, so the same message always becomes
 * the same bytes (the prompt prefix stays identical and provider caches hit).
 */
import type { ChatMessage } from "../../llm/types.js";
import { formatToolHint } from "../format.js";

/** Tool results shorter than this are left alone: their stub would not save anything worth it. */
export const MIN_STUB_CHARS = 600;
/** Arguments longer than this are shrunk when their result is cleared. */
export const LARGE_ARGUMENTS_CHARS = 1000;
/** String values longer than this inside large arguments are replaced. */
const LARGE_VALUE_CHARS = 200;

type Call = NonNullable<ChatMessage["tool_calls"]>[number];

const resultStubs = new WeakMap<ChatMessage, ChatMessage>();
const argumentStubs = new WeakMap<ChatMessage, Map<string, ChatMessage>>();

/** Whether clearing this tool result is worth it. */
export function worthStubbing(msg: ChatMessage): boolean {
  return msg.role === "tool" && textLength(msg.content) >= MIN_STUB_CHARS;
}

/** The tool message with its content replaced by a stub naming the call. */
export function stubResult(msg: ChatMessage, call: Call | undefined): ChatMessage {
  const known = resultStubs.get(msg);
  if (known) return known;
  const what = call ? describeCall(call) : `${msg.name ?? "a tool"}()`;
  const stub: ChatMessage = {
    ...msg,
    content:
      `[content cleared to save context: ${what} returned ${textLength(msg.content)} characters; ` +
      "call it again if you need it]",
  };
  resultStubs.set(msg, stub);
  return stub;
}

/** The assistant message with the large arguments of the calls `ids` shrunk; itself when none is large. */
export function stubArguments(msg: ChatMessage, ids: ReadonlySet<string>): ChatMessage {
  const calls = msg.tool_calls ?? [];
  if (!calls.some((c) => ids.has(c.id) && c.function.arguments.length > LARGE_ARGUMENTS_CHARS)) return msg;
  const key = calls
    .filter((c) => ids.has(c.id))
    .map((c) => c.id)
    .join("\u0000");
  let byIds = argumentStubs.get(msg);
  const known = byIds?.get(key);
  if (known) return known;
  const stub: ChatMessage = {
    ...msg,
    tool_calls: calls.map((c) =>
      ids.has(c.id) && c.function.arguments.length > LARGE_ARGUMENTS_CHARS
        ? { ...c, function: { name: c.function.name, arguments: shrinkArguments(c.function.arguments) } }
        : c,
    ),
  };
  if (!byIds) argumentStubs.set(msg, (byIds = new Map<string, ChatMessage>()));
  byIds.set(key, stub);
  return stub;
}

/** `read_file("notes.md")`: the call as the tool hints show it. */
function describeCall(call: Call): string {
  return formatToolHint({
    id: call.id,
    name: call.function.name,
    arguments: parseObject(call.function.arguments) ?? {},
    rawArguments: call.function.arguments,
  });
}

/** Still a JSON object (providers parse it), with each long string value replaced by its length. */
function shrinkArguments(raw: string): string {
  const parsed = parseObject(raw);
  if (!parsed)
    return JSON.stringify({ note: `[arguments cleared to save context: ${raw.length} characters]` });
  return JSON.stringify(parsed, (_key, value: unknown) =>
    typeof value === "string" && value.length > LARGE_VALUE_CHARS
      ? `[content cleared to save context: ${value.length} characters]`
      : value,
  );
}

function parseObject(raw: string): Record<string, unknown> | undefined {
  try {
    const value: unknown = JSON.parse(raw);
    return value && typeof value === "object" && !Array.isArray(value)
      ? (value as Record<string, unknown>)
      : undefined;
  } catch {
    return undefined;
  }
}

function textLength(content: ChatMessage["content"]): number {
  if (typeof content === "string") return content.length;
  if (!content) return 0;
  let n = 0;
  for (const part of content) if (part.type === "text") n += part.text.length;
  return n;
}
