/**
 * Tool tiers: the core tools' schemas go with every call; the others (MCP tools, cron, spawn,
 * optional tools) are listed in the system prompt as a short directory and their schemas are sent
 * only once the session has loaded them (load_tools, or a call to one). Loaded schemas come after
 * the core ones, so the prefix a provider caches stays the same. "auto" defers only when the
 * deferred schemas would cost more than minDeferredTokens; "off" sends everything, as before.
 */
import type { ChatMessage, ToolDefinition } from "../llm/types.js";
import { globToNameRegExp } from "./tools/name-glob.js";
import type { ToolRegistry } from "./tools/registry.js";

/** Always sent: what almost every task needs, and the way to the rest. */
const CORE_TOOLS = new Set([
  "read_file",
  "write_file",
  "edit_file",
  "list_dir",
  "find_files",
  "grep",
  "exec",
  "web_fetch",
  "web_search",
  "message",
  "memory_search",
  "memory_get",
  "ask_human",
  "todo_write",
  "todo_read",
  "load_tools",
]);

/** The session metadata key of the tools a session has loaded, in load order. */
const LOADED_KEY = "palaver_loaded_tools";

/** Characters of a tool's description kept in the directory line. */
const DIRECTORY_LINE_CHARS = 80;

export interface TierSettings {
  mode: "auto" | "off";
  minDeferredTokens: number;
}

export class ToolTiers {
  /** The last answers, while the registry's definitions stay the same array (its tools unchanged). */
  private memo:
    { all: readonly ToolDefinition[]; deferred: string[]; sent: Map<string, ToolDefinition[]> } | undefined;

  constructor(
    private readonly tools: ToolRegistry,
    private readonly settings: TierSettings,
    /** Tokens of a list of tool definitions (agent/budget/tokens.ts TokenCounter.tools). */
    private readonly countTokens: (definitions: readonly ToolDefinition[]) => number,
  ) {}

  /** The deferred tools' names, sorted; empty when tiers are off or not worth it now. */
  deferred(): string[] {
    return this.current().deferred;
  }

  private current(): NonNullable<ToolTiers["memo"]> {
    const all = this.tools.definitions();
    if (this.memo?.all === all) return this.memo;
    this.memo = { all, deferred: this.computeDeferred(all), sent: new Map() };
    return this.memo;
  }

  private computeDeferred(all: readonly ToolDefinition[]): string[] {
    if (this.settings.mode === "off") return [];
    const deferred = all.filter((d) => !CORE_TOOLS.has(d.function.name));
    if (deferred.length === 0 || this.countTokens(deferred) <= this.settings.minDeferredTokens) return [];
    return deferred.map((d) => d.function.name).sort();
  }

  /** What one call sends: every core (or not deferred) tool in registry order, then the loaded ones in load order. */
  definitions(metadata: Record<string, unknown>): readonly ToolDefinition[] {
    const memo = this.current();
    const deferred = new Set(memo.deferred);
    const loadedNames = loadedTools(metadata).filter((name) => deferred.has(name));
    // One array per loaded set, so the budget's token count of it is cached (by identity).
    const key = loadedNames.join("\n");
    const known = memo.sent.get(key);
    if (known) return known;
    const byName = new Map(memo.all.map((d) => [d.function.name, d]));
    const sent = [
      ...memo.all.filter((d) => !deferred.has(d.function.name)),
      ...loadedNames.map((name) => byName.get(name)!),
    ];
    // Bounded: many chats with different loaded sets only cost a recount now and then.
    if (memo.sent.size >= 100) memo.sent.clear();
    memo.sent.set(key, sent);
    return sent;
  }

  /** The deferred tools matching the globs (`mcp_github_*`), sorted. */
  match(globs: readonly string[]): string[] {
    const patterns = globs.map(globToNameRegExp);
    return this.deferred().filter((name) => patterns.some((p) => p.test(name)));
  }

  /**
   * Adds tools to the session's loaded set (metadata, saved by the caller). Returns whether it
   * changed. Known deferred tools only; order kept, so earlier schemas never move.
   */
  load(metadata: Record<string, unknown>, names: readonly string[]): boolean {
    const deferred = new Set(this.deferred());
    const loaded = loadedTools(metadata);
    const added = names.filter((n) => deferred.has(n) && !loaded.includes(n));
    if (added.length === 0) return false;
    metadata[LOADED_KEY] = [...loaded, ...added];
    return true;
  }

  /** The system prompt's directory of deferred tools: name and one line, grouped by MCP server; null when none. */
  directory(): string | null {
    const deferred = this.deferred();
    if (deferred.length === 0) return null;
    const byName = new Map(this.tools.definitions().map((d) => [d.function.name, d]));
    const groups = new Map<string, string[]>();
    for (const name of deferred) {
      const group = this.tools.groupOf(name);
      const title = group ? `MCP server ${group}` : "palaver";
      const line = `- ${name}: ${oneLine(byName.get(name)?.function.description ?? "")}`;
      groups.set(title, [...(groups.get(title) ?? []), line]);
    }
    const sections = [...groups.keys()]
      .sort()
      .map((title) => `## ${title}\n${groups.get(title)!.join("\n")}`);
    return (
      "# More tools\n\n" +
      "These tools are available but their parameters are not loaded yet. Call load_tools with their " +
      "names (globs such as mcp_github_* work) to use them; they stay loaded for this conversation.\n\n" +
      sections.join("\n\n")
    );
  }
}

export function loadedTools(metadata: Record<string, unknown>): string[] {
  const raw = metadata[LOADED_KEY];
  return Array.isArray(raw) ? raw.filter((n): n is string => typeof n === "string") : [];
}

/** Drops the session's loaded tools (/new: a new conversation starts with the core ones). */
export function forgetLoadedTools(metadata: Record<string, unknown>): void {
  delete metadata[LOADED_KEY];
}

/** The prompt with the directory added to its system message (a copy); unchanged without one. */
export function withToolDirectory(messages: ChatMessage[], directory: string | null): ChatMessage[] {
  const system = messages[0];
  if (directory === null || system?.role !== "system" || typeof system.content !== "string") return messages;
  return [{ ...system, content: `${system.content}\n\n---\n\n${directory}` }, ...messages.slice(1)];
}

/** The description's first sentence, on one line and cut at DIRECTORY_LINE_CHARS: enough to choose by. */
function oneLine(description: string): string {
  const flat = description.replace(/\s+/g, " ").trim();
  const line = /^.*?[.!?](?=\s|$)/.exec(flat)?.[0] ?? flat;
  return line.length > DIRECTORY_LINE_CHARS ? `${line.slice(0, DIRECTORY_LINE_CHARS - 1).trimEnd()}…` : line;
}
