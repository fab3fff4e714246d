/**
 * `palaver memory search|status|reindex|log|restore`: the memory search index and the versions of
 * MEMORY.md from the terminal. They work whether or not the gateway runs: the index is SQLite in
 * WAL mode (a reader never blocks the gateway's writes), and a restored MEMORY.md is noticed by a
 * running gateway at its next search or turn. The terminal is the owner: search covers every chat.
 */
import type { Command } from "commander";
import { join } from "node:path";
import { MemoryFiles } from "../agent/memory.js";
import { describeHit } from "../agent/tools/memory-search.js";
import { memoryIndexPath, memoryVersionsDir, stateDir } from "../config/paths.js";
import { embedderFor, type Embedder } from "../llm/embeddings.js";
import { logger } from "../log.js";
import { MemoryRecall } from "../recall/service.js";
import { describeEmbeddings } from "../recall/summary.js";
import { lineChanges, MemoryVersions } from "../recall/versions.js";
import { sessionsDirOf } from "../sessions/store.js";
import { addCommonOptions, guarded, loadForCli } from "./common.js";

export function registerMemoryCommand(program: Command): void {
  const memory = program
    .command("memory")
    .description("search what the assistant remembers, see and undo changes to MEMORY.md");

  const search = memory
    .command("search")
    .description("search MEMORY.md, HISTORY.md and every conversation")
    .argument("<query>", "words to look for")
    .option("--json", "print the hits as JSON")
    .option("--limit <n>", "how many hits (1-20)", "5")
    .action((query: string, opts: { json?: boolean; limit: string }) =>
      guarded(async () => {
        const limit = Number(opts.limit);
        if (!Number.isInteger(limit) || limit < 1 || limit > 20)
          throw new Error(`--limit must be a whole number from 1 to 20, got "${opts.limit}"`);
        await withRecall(search, async (recall) => {
          const hits = await recall.search({ query, limit });
          if (opts.json) process.stdout.write(`${JSON.stringify(hits, null, 2)}\n`);
          else if (hits.length === 0) process.stdout.write(`No match for "${query}".\n`);
          else process.stdout.write(hits.map((h, i) => `${i + 1}. ${describeHit(h)}`).join("\n") + "\n");
        });
      }),
    );

  const status = memory
    .command("status")
    .description("what is indexed, the size on disk and the last update")
    .action(() =>
      guarded(() =>
        withRecall(status, async (recall) => {
          const s = await recall.status();
          process.stdout.write(
            [
              `Index: ${s.indexPath} (${(s.bytesOnDisk / 1e6).toFixed(1)} MB)`,
              `Indexed: ${s.documents.session} messages, ${s.documents.memory} MEMORY.md sections, ` +
                `${s.documents.history} HISTORY.md entries`,
              `Last update: ${s.updatedAt ?? "never"}`,
              `Ranking: ${s.embeddings.state === "off" ? "full text (BM25)" : "full text (BM25) and meaning, fused by rank"}; ` +
                describeEmbeddings(
                  s.embeddings,
                  s.documents.session + s.documents.memory + s.documents.history,
                ),
            ].join("\n") + "\n",
          );
        }),
      ),
    );

  const reindex = memory
    .command("reindex")
    .description("index every session and memory file again")
    .action(() =>
      guarded(() =>
        withRecall(reindex, async (recall) => {
          await recall.reindex();
          const s = await recall.status();
          process.stdout.write(
            `Reindexed: ${s.documents.session} messages, ${s.documents.memory + s.documents.history} memory pieces.\n`,
          );
        }),
      ),
    );

  const log = memory
    .command("log")
    .description("the versions of MEMORY.md kept, newest first")
    .action(() =>
      guarded(async () => {
        const versions = versionsFor(log);
        const list = await versions.list();
        if (list.length === 0) {
          process.stdout.write("No versions of MEMORY.md kept yet.\n");
          return;
        }
        const texts = await Promise.all(list.map((v) => versions.read(v.id).catch(() => "")));
        const lines = list.map((v, i) => {
          const older = texts[i + 1];
          const change = older === undefined ? "first kept" : formatChange(lineChanges(older, texts[i]!));
          return `${v.id}  ${v.at.toISOString()}  ${v.reason.padEnd(7)}  ${texts[i]!.length} chars, ${change}`;
        });
        process.stdout.write(lines.join("\n") + "\n");
      }),
    );

  const restore = memory
    .command("restore")
    .description("put a version of MEMORY.md back (the current one is kept as a version first)")
    .argument("<version>", "a version id from `palaver memory log`")
    .action((id: string) =>
      guarded(async () => {
        const { workspace, versions } = open(restore);
        const text = await versions.read(id);
        const files = new MemoryFiles(workspace);
        files.keepVersion = async (t, when) => {
          await versions.keep(t, when === "before" ? "edit" : "restore");
        };
        await files.writeMemory(text);
        process.stdout.write(`MEMORY.md restored to version ${id} (${text.length} characters).\n`);
      }),
    );

  for (const cmd of [search, status, reindex, log, restore]) addCommonOptions(cmd);
}

function open(cmd: Command): {
  workspace: string;
  state: string;
  versions: MemoryVersions;
  includeToolResults: boolean;
  embedder: Embedder | undefined;
} {
  const loaded = loadForCli(cmd, { level: "warn" });
  const state = stateDir(loaded.path);
  return {
    workspace: loaded.workspace,
    state,
    versions: new MemoryVersions(memoryVersionsDir(state)),
    includeToolResults: loaded.config.memory.search.includeToolResults,
    embedder: embedderFor(loaded.config, logger("memory")),
  };
}

function versionsFor(cmd: Command): MemoryVersions {
  return open(cmd).versions;
}

async function withRecall(cmd: Command, work: (recall: MemoryRecall) => Promise<void>): Promise<void> {
  const { workspace, state, versions, includeToolResults, embedder } = open(cmd);
  const sessionsDir = sessionsDirOf(workspace);
  const files = new MemoryFiles(workspace);
  const made = MemoryRecall.create({
    indexPath: memoryIndexPath(state),
    sessionsDir,
    archiveDir: join(sessionsDir, "archive"),
    memoryFile: files.paths.memory,
    historyFile: files.paths.history,
    includeToolResults,
    versions,
    embedder,
    log: logger("memory"),
  });
  if ("missing" in made) throw new Error(made.missing);
  try {
    await work(made);
  } finally {
    await made.close();
  }
}

function formatChange({ added, removed }: { added: number; removed: number }): string {
  return `+${added} -${removed} lines`;
}
