/**
 * Memory search (recall/) and the versions of MEMORY.md, assembled for createAgent: the index fed
 * by the session store, the memory_search and memory_get tools, the hook that keeps a version
 * before and after every write of MEMORY.md, and `/memory` for the loop.
 *
 * On a Node without `node:sqlite` the tools are absent (one warning at start); versions, /memory
 * and the archive of sessions ended by /new work all the same.
 */
import type { MemoryFiles } from "./agent/memory.js";
import { createMemoryTools } from "./agent/tools/memory-search.js";
import type { ToolRegistry } from "./agent/tools/registry.js";
import type { InboundMessage } from "./bus/types.js";
import { memoryIndexPath, memoryVersionsDir } from "./config/paths.js";
import type { Config } from "./config/schema.js";
import { embedderFor } from "./llm/embeddings.js";
import { logger } from "./log.js";
import { memoryCommand } from "./recall/chat-command.js";
import { MemoryRecall } from "./recall/service.js";
import { summaryLine } from "./recall/summary.js";
import { MemoryVersions } from "./recall/versions.js";
import type { SessionStorage } from "./sessions/storage.js";

export interface RecallSetup {
  /** Absent when this Node has no node:sqlite. */
  recall: MemoryRecall | undefined;
  /** The loop's `/memory` (AgentLoopDeps.memoryCommand). */
  command: (msg: InboundMessage, args: string) => Promise<string>;
  /** The /status line about memory search. */
  statusLine: () => string;
}

export function createRecall(opts: {
  config: Config;
  stateDir: string;
  sessions: SessionStorage;
  memory: MemoryFiles;
  tools: ToolRegistry;
  /** Who may undo memory changes (create-agent.ts's owner check). */
  isOwner: (msg: InboundMessage) => boolean;
}): RecallSetup {
  const { config, stateDir, sessions, memory, tools } = opts;
  const log = logger("memory");
  const versions = new MemoryVersions(memoryVersionsDir(stateDir));
  memory.keepVersion = async (text, when) => {
    try {
      await versions.keep(text, when === "before" ? "edit" : "write");
    } catch (err) {
      log.warn(
        { err },
        "could not keep a version of MEMORY.md; the change cannot be undone with /memory undo",
      );
    }
  };
  // Sessions in the cluster database: read at start beside (instead of) the files, and caught up
  // with before a search.
  const messagesFrom = sessions.messagesFrom?.bind(sessions);
  const found = MemoryRecall.create({
    indexPath: memoryIndexPath(stateDir),
    sessionsDir: sessions.sessionsDir,
    archiveDir: sessions.archiveDir ?? sessions.sessionsDir,
    ...(messagesFrom ? { storedSessions: { list: () => sessions.list(), messagesFrom } } : {}),
    memoryFile: memory.paths.memory,
    historyFile: memory.paths.history,
    includeToolResults: config.memory.search.includeToolResults,
    versions,
    embedder: embedderFor(config, log),
    log,
  });
  let recall: MemoryRecall | undefined;
  let statusLine = () => "Memory search: off (this Node.js has no node:sqlite)";
  if ("missing" in found) {
    log.warn(`${found.missing}: memory_search and memory_get are off`);
    // No index to notice a hand edit at start: keep the file as it is now, as the index would.
    void memory.readMemory().then(
      (text) => memory.keepVersion?.(text, "after"),
      () => undefined,
    );
  } else {
    recall = found;
    statusLine = () => {
      const summary = found.summary();
      return `Memory search: ${summary ? summaryLine(summary) : "opening the index"}`;
    };
    sessions.onAppended = (key, messages) => found.enqueue(key, messages);
    found.start().catch((err: unknown) => log.error({ err }, "memory search could not open its index"));
    for (const tool of createMemoryTools(found, config.memory.search.scope)) tools.register(tool);
  }
  return {
    recall,
    statusLine: () => statusLine(),
    command: (msg, args) =>
      memoryCommand(
        { versions, read: () => memory.readMemory(), write: (text) => memory.writeMemory(text) },
        args,
        opts.isOwner(msg),
      ),
  };
}
