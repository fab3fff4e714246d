/**
 * Pure mappings between MCP and palaver's tools: tool names, allow/deny
 * filtering, the parameter schema the model sees, and a call result (or
 * failure) turned into text the model can read.
 */
import { createHash } from "node:crypto";
import {
  ErrorCode,
  McpError,
  type CallToolResult,
  type ContentBlock,
} from "@modelcontextprotocol/sdk/types.js";
import * as z from "zod";
import { truncateToolResult } from "../agent/format.js";
import { errorMessage, ToolError } from "../util/errors.js";

/** OpenAI-compatible APIs refuse longer function names. */
export const MAX_TOOL_NAME = 64;

/**
 * `mcp_<server>_<tool>` with everything outside [a-zA-Z0-9_-] replaced by "_".
 * A name that would be too long is cut and ends in a short hash of the full
 * name, so two long tools of one server still get different names.
 */
export function mcpToolName(server: string, tool: string): string {
  const raw = `mcp_${server}_${tool}`.replace(/[^a-zA-Z0-9_-]/g, "_");
  if (raw.length <= MAX_TOOL_NAME) return raw;
  const hash = createHash("sha256").update(`${server}\u0000${tool}`).digest("hex").slice(0, 8);
  return `${raw.slice(0, MAX_TOOL_NAME - hash.length - 1)}_${hash}`;
}

export interface ToolFilter {
  /** Only these tools ("*" = all); an empty list allows none. */
  allow?: readonly string[];
  /** Never these tools. */
  deny?: readonly string[];
}

/** Whether a tool passes the server's allow/deny lists, which may name it either way (`echo` or `mcp_srv_echo`). */
export function toolAllowed(tool: string, exposedName: string, filter: ToolFilter | undefined): boolean {
  const names = (list: readonly string[]) => list.includes(tool) || list.includes(exposedName);
  if (filter?.allow && !filter.allow.includes("*") && !names(filter.allow)) return false;
  if (filter?.deny && names(filter.deny)) return false;
  return true;
}

/**
 * The `parameters` of a palaver Tool for an MCP tool. The server owns the
 * schema and validates the arguments itself, so palaver only checks that they
 * are an object; the server's JSON Schema rides along as zod metadata, which
 * z.toJSONSchema (used by ToolRegistry.definitions) merges over the generated
 * `{type: "object"}`, so the model sees the server's schema as written.
 */
export function inputParameters(inputSchema: Readonly<Record<string, unknown>>): z.ZodType {
  // `id`/`$id` would be taken by zod as a registry id; `$schema` is dropped by the registry anyway.
  const { $schema: _schema, $id: _id, id: _legacyId, ...rest } = inputSchema;
  const schema: Record<string, unknown> = { ...rest, type: "object" };
  if (
    typeof schema.properties !== "object" ||
    schema.properties === null ||
    Array.isArray(schema.properties)
  ) {
    schema.properties = {};
  }
  return z.looseObject({}).meta(schema);
}

export interface FormatResultOptions {
  /** Longer results keep their head and tail, with a notice in the middle. */
  maxChars: number;
  /** Workspace-relative paths where binary content (by index in result.content) was saved. */
  saved?: ReadonlyMap<number, string>;
}

/** A tools/call result as text for the model. */
export function formatCallResult(result: CallToolResult, opts: FormatResultOptions): string {
  const parts = (result.content ?? []).map((block, i) => formatBlock(block, opts.saved?.get(i)));
  const structured = result.structuredContent;
  if (structured !== undefined) {
    const compact = stringify(structured);
    if (compact === null) parts.push("Structured result: (nested too deeply to show)");
    else if (!repeatsStructured(result.content ?? [], compact)) {
      // Pretty-printing a huge result only costs time: it is cut to maxChars anyway.
      parts.push(
        `Structured result:\n${compact.length <= MAX_JSON_COMPARE ? JSON.stringify(structured, null, 2) : compact}`,
      );
    }
  }
  let text = parts.join("\n");
  if (result.isError) {
    text = `Error: ${text.trim() || "the tool reported a failure without saying why."}`;
  } else if (text.trim() === "") {
    text = "(the tool returned no output)";
  }
  return truncateToolResult(text, opts.maxChars);
}

function formatBlock(block: ContentBlock, saved: string | undefined): string {
  const where = saved ? `, saved to ${saved}` : "";
  switch (block.type) {
    case "text":
      return block.text;
    case "image":
    case "audio":
      return `[${block.type}: ${block.mimeType}, ${base64Bytes(block.data)} bytes${where}]`;
    case "resource": {
      const r = block.resource;
      const mime = r.mimeType ? ` (${r.mimeType})` : "";
      if ("text" in r) return `[resource ${r.uri}${mime}]\n${r.text}`;
      return `[resource ${r.uri}${mime}: ${base64Bytes(r.blob)} bytes${where}]`;
    }
    case "resource_link": {
      const mime = block.mimeType ? ` (${block.mimeType})` : "";
      const about = block.description ? ` - ${block.description}` : "";
      return `[resource link: ${block.name} <${block.uri}>${mime}${about}]`;
    }
    default:
      return `[${(block as { type: string }).type} content]`;
  }
}

/**
 * Text blocks longer than this are not parsed to compare them with the
 * structured result: parsing and printing megabytes holds the event loop.
 */
const MAX_JSON_COMPARE = 1024 * 1024;

/** JSON of a server's structured result, or null when it is nested too deeply to print (RangeError). */
function stringify(value: unknown): string | null {
  try {
    return JSON.stringify(value);
  } catch {
    return null;
  }
}

/** Servers are asked to send structured results also as JSON text; then once is enough. */
function repeatsStructured(content: readonly ContentBlock[], want: string): boolean {
  return content.some((block) => {
    if (block.type !== "text") return false;
    if (block.text === want) return true;
    if (block.text.length > MAX_JSON_COMPARE) return false;
    try {
      return stringify(JSON.parse(block.text)) === want;
    } catch {
      return false;
    }
  });
}

/** Decoded size of base64 text, without decoding it. */
export function base64Bytes(data: string): number {
  const clean = data.replace(/\s/g, "");
  const padding = clean.endsWith("==") ? 2 : clean.endsWith("=") ? 1 : 0;
  return Math.max(0, Math.floor((clean.length * 3) / 4) - padding);
}

export interface CallErrorInfo {
  /** The name the model used (mcp_server_tool). */
  tool: string;
  server: string;
  timeoutSeconds: number;
}

/** A failed call as plain words for the model. */
export function describeCallError(err: unknown, info: CallErrorInfo): string {
  if (err instanceof McpError) {
    if (err.code === (ErrorCode.RequestTimeout as number)) {
      return (
        `Error: ${info.tool} did not finish within ${info.timeoutSeconds} s, so it was cancelled ` +
        `(the MCP server "${info.server}" was told to stop). It may be slow or stuck: ` +
        `try a smaller request, or go on without this tool.`
      );
    }
    if (err.code === (ErrorCode.ConnectionClosed as number)) {
      return (
        `Error: the MCP server "${info.server}" closed the connection while running ${info.tool} ` +
        `(it may have crashed). It will be restarted on the next call.`
      );
    }
  }
  if (err instanceof ToolError) return `Error: ${err.message}`;
  return `Error: ${info.tool} failed: ${errorMessage(err)}`;
}
