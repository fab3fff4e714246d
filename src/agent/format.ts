/** Pure text helpers of the agent: tool hints, truncation, what a session keeps. */
import type { ChatMessage, ContentPart, ToolCall } from "../llm/types.js";

const HINT_ARG_MAX = 40;

/** `read_file("notes.md")`: the tool name and its first argument, shortened. */
export function formatToolHint(call: ToolCall): string {
  const first = Object.values(call.arguments)[0];
  if (first === undefined) return `${call.name}()`;
  const text = typeof first === "string" ? first : JSON.stringify(first);
  const short = text.length > HINT_ARG_MAX ? `${text.slice(0, HINT_ARG_MAX)}…` : text;
  return `${call.name}(${JSON.stringify(short)})`;
}

/** Keeps the head and tail of a long tool result, with a visible notice in the middle. */
export function truncateToolResult(text: string, maxChars: number): string {
  if (text.length <= maxChars) return text;
  const keepHead = Math.floor(maxChars * 0.8);
  const keepTail = maxChars - keepHead;
  const omitted = text.length - keepHead - keepTail;
  return (
    `${text.slice(0, keepHead)}\n\n[… truncated: ${omitted} of ${text.length} characters omitted …]\n\n` +
    text.slice(text.length - keepTail)
  );
}

/** Content as the session stores it: base64 images become "[image]" so files stay small. */
export function contentForSession(content: ChatMessage["content"]): ChatMessage["content"] {
  if (!Array.isArray(content)) return content;
  return content.map((part): ContentPart =>
    part.type === "image_url" && part.image_url.url.startsWith("data:")
      ? { type: "text", text: "[image]" }
      : part,
  );
}
