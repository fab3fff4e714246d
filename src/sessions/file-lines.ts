/**
 * A session file's text, judged line by line (nanobot's JSONL: one metadata line, then one message
 * per line): the messages in order, the metadata lines, and the lines that are neither, which the
 * store skips and keeps aside. Pure: the store (store.ts) reads the file and logs.
 */
import * as z from "zod";
import type { ChatMessage } from "../llm/types.js";

const ToolCallSchema = z.looseObject({
  id: z.string(),
  type: z.literal("function").default("function"),
  function: z.looseObject({
    name: z.string(),
    // Some writers stored parsed arguments; the wire format wants the JSON text.
    arguments: z.union([z.string(), z.record(z.string(), z.unknown()).transform((a) => JSON.stringify(a))]),
  }),
});

const MessageLineSchema = z.looseObject({
  role: z.enum(["system", "user", "assistant", "tool"]),
  content: z.union([z.string(), z.array(z.unknown()), z.null()]).optional(),
  tool_calls: z.array(ToolCallSchema).optional(),
  tool_call_id: z.string().optional(),
  name: z.string().optional(),
});

/**
 * A metadata line as nanobot writes it. Timestamps are checked by
 * store.ts's parseTimestamp (an unreadable one is ignored, not fatal: nanobot may write
 * other precisions); everything else must have the right type, or the line is
 * skipped and kept aside.
 */
const MetadataLineSchema = z.looseObject({
  _type: z.literal("metadata"),
  key: z.string().optional(),
  created_at: z.string().nullish(),
  updated_at: z.string().nullish(),
  metadata: z.record(z.string(), z.unknown()).nullish(),
  last_consolidated: z.number().int().nonnegative().nullish(),
});
export type MetadataLine = z.infer<typeof MetadataLineSchema>;

/**
 * The one place a session line is judged: the parsed line, or why it is
 * skipped. A line with `_type: "metadata"` is only ever a metadata line (a
 * broken one is not read as a message).
 */
function parseSessionLine(
  line: string,
): { kind: "metadata"; data: MetadataLine } | { kind: "message"; data: ChatMessage } | { problem: string } {
  let json: unknown;
  try {
    json = JSON.parse(line);
  } catch {
    return { problem: "not valid JSON (truncated or corrupt)" };
  }
  // Fast path: a message line as palaver and nanobot write it is taken as it is; only a line that
  // fails this check goes through the schema (which also repairs what it can: see ToolCallSchema).
  if (isWellFormedMessage(json)) return { kind: "message", data: json as ChatMessage };
  const schema = isObject(json) && json._type === "metadata" ? MetadataLineSchema : MessageLineSchema;
  const parsed = schema.safeParse(json);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const where = issue?.path.length ? `${issue.path.join(".")}: ` : "";
    return { problem: `wrong shape (${where}${issue?.message ?? "invalid"})` };
  }
  const data = parsed.data as Record<string, unknown>;
  return data._type === "metadata"
    ? { kind: "metadata", data: data as MetadataLine }
    : { kind: "message", data: data as unknown as ChatMessage };
}

const ROLES = new Set(["system", "user", "assistant", "tool"]);
const isOptionalString = (v: unknown) => v === undefined || typeof v === "string";

/**
 * Whether MessageLineSchema would take this line unchanged: the same rules written out by hand,
 * much cheaper than the zod parse on a long session's first load. Anything it does not
 * recognise (a default to fill, arguments to stringify, a wrong type) goes to the schema.
 */
function isWellFormedMessage(json: unknown): boolean {
  if (!isObject(json) || json._type === "metadata" || !ROLES.has(json.role as string)) return false;
  const { content, tool_calls: toolCalls } = json;
  // Content parts (images) are rare and have shapes of their own: the schema checks those.
  if (!(content === undefined || content === null || typeof content === "string")) return false;
  if (!isOptionalString(json.tool_call_id) || !isOptionalString(json.name)) return false;
  if (toolCalls === undefined) return true;
  if (!Array.isArray(toolCalls)) return false;
  return toolCalls.every(
    (call) =>
      isObject(call) &&
      typeof call.id === "string" &&
      call.type === "function" &&
      isObject(call.function) &&
      typeof call.function.name === "string" &&
      typeof call.function.arguments === "string",
  );
}

export function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

export interface BadLine {
  lineNo: number;
  line: string;
  problem: string;
}

/**
 * The lines of a session file's bytes, pushed into `messages` in order; returns its metadata lines
 * (in order: the last one wins) and the lines that did not parse. A synchronous function of its
 * own, not a loop inside the store's async load(): that loop, in a function called once per
 * session, was compiled anew (on-stack replacement) by every load, where this one stays optimized
 * from one load to the next (bench/session-load.ts measures it).
 */
export function readLines(
  data: Buffer,
  messages: ChatMessage[],
): { metadata: MetadataLine[]; bad: BadLine[] } {
  const metadata: MetadataLine[] = [];
  const bad: BadLine[] = [];
  let lineNo = 0;
  for (const chunk of chunksOfLines(data)) {
    for (const raw of chunk.split("\n")) {
      lineNo++;
      const line = raw.trim();
      if (line === "") continue;
      const parsed = parseSessionLine(line);
      if ("problem" in parsed) bad.push({ lineNo, line, problem: parsed.problem });
      else if (parsed.kind === "metadata") metadata.push(parsed.data);
      else messages.push(parsed.data);
    }
  }
  return { metadata, bad };
}

/** Bytes decoded at a time while loading a session (see chunksOfLines). */
const LOAD_CHUNK_BYTES = 64 * 1024;

/**
 * The text of `data` in pieces of about LOAD_CHUNK_BYTES that end at a line break (the break
 * itself dropped), so each piece splits into whole lines. Decoding a piece at a time is one native
 * call per ~250 lines instead of one per line (a fifth of a 10,000-message session's load), never
 * one giant string for a long session, and a line with non-Latin-1 text makes only its own piece
 * a two-byte string, which JSON.parse reads more slowly.
 */
function* chunksOfLines(data: Buffer): Generator<string> {
  for (let start = 0; start < data.length;) {
    let end = Math.min(data.length, start + LOAD_CHUNK_BYTES);
    if (end < data.length) {
      const lastBreak = data.lastIndexOf(0x0a, end);
      const nextBreak = lastBreak >= start ? lastBreak : data.indexOf(0x0a, end);
      end = nextBreak === -1 ? data.length : nextBreak;
    }
    yield data.toString("utf8", start, end);
    start = end + 1;
  }
}
