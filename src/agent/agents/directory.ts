/**
 * The named agents of a workspace: every `agents/*.md` file, read at the first use and again
 * when a file's inode, size or mtime moved. Every turn asks for the catalog (the main agent's
 * prompt lists the agents), so the folder is looked at again only once CATALOG_TTL_MS has passed:
 * an edit shows within that time, and a busy chat costs no folder scan per message. A broken file is
 * reported (path and line, in the log once per version of the file, and to whoever asks:
 * `palaver agents check`, `palaver status`) and left out; the other agents still load.
 */
import { readFile, readdir, stat } from "node:fs/promises";
import { join } from "node:path";
import { logger, type Logger } from "../../log.js";
import { errorMessage } from "../../util/errors.js";
import { formatProblem, parseAgentFile, type AgentDefinition, type AgentProblem } from "./definition.js";

export interface AgentCatalog {
  /** By name, sorted by name. */
  agents: ReadonlyMap<string, AgentDefinition>;
  problems: readonly AgentProblem[];
}

type Parsed = { agent: AgentDefinition } | { problems: AgentProblem[] };

/** Files looked at: a bound, not a limit anyone should meet. */
const MAX_AGENT_FILES = 200;
/** How long a catalog is used before the folder is read again. */
const CATALOG_TTL_MS = 2_000;

export class AgentDirectory {
  private readonly cache = new Map<string, { version: string; parsed: Parsed }>();
  private readonly log: Logger;
  private recent: { at: number; catalog: Promise<AgentCatalog> } | undefined;

  constructor(
    readonly workspace: string,
    log?: Logger,
  ) {
    this.log = log ?? logger("agents");
  }

  get dir(): string {
    return join(this.workspace, "agents");
  }

  catalog(): Promise<AgentCatalog> {
    const now = performance.now();
    if (!this.recent || now - this.recent.at >= CATALOG_TTL_MS) {
      this.recent = { at: now, catalog: this.read() };
    }
    return this.recent.catalog;
  }

  private async read(): Promise<AgentCatalog> {
    let names: string[];
    try {
      names = (await readdir(this.dir)).filter((n) => n.endsWith(".md") && !n.startsWith(".")).sort();
    } catch (err) {
      if (isErrno(err, "ENOENT") || isErrno(err, "ENOTDIR")) return { agents: new Map(), problems: [] };
      return {
        agents: new Map(),
        problems: [{ path: this.dir, line: 0, message: `cannot list: ${errorMessage(err)}` }],
      };
    }
    const parsed = await Promise.all(names.slice(0, MAX_AGENT_FILES).map((n) => this.load(n)));
    const agents = new Map<string, AgentDefinition>();
    const problems: AgentProblem[] = [];
    for (const p of parsed) {
      if (!p) continue;
      if ("problems" in p) {
        problems.push(...p.problems);
      } else if (agents.has(p.agent.name)) {
        const first = agents.get(p.agent.name)!.path;
        problems.push({
          path: p.agent.path,
          line: 1,
          message: `the name "${p.agent.name}" is taken by ${first}`,
        });
      } else {
        agents.set(p.agent.name, p.agent);
      }
    }
    return { agents, problems };
  }

  /** One agent by name, or undefined (unknown or broken). */
  async get(name: string): Promise<AgentDefinition | undefined> {
    return (await this.catalog()).agents.get(name);
  }

  private async load(fileName: string): Promise<Parsed | undefined> {
    const path = join(this.dir, fileName);
    try {
      const st = await stat(path);
      if (!st.isFile()) return undefined;
      const version = `${st.ino}:${st.size}:${st.mtimeMs}`;
      const hit = this.cache.get(path);
      if (hit?.version === version) return hit.parsed;
      const parsed = parseAgentFile(path, fileName, await readFile(path, "utf8"));
      this.cache.set(path, { version, parsed });
      if ("problems" in parsed) {
        for (const p of parsed.problems) this.log.warn({ path: p.path, line: p.line }, formatProblem(p));
      } else {
        this.log.info({ agent: parsed.agent.name, path }, "agent loaded");
      }
      return parsed;
    } catch (err) {
      this.cache.delete(path);
      if (isErrno(err, "ENOENT")) return undefined;
      return { problems: [{ path, line: 0, message: `cannot read: ${errorMessage(err)}` }] };
    }
  }
}

function isErrno(err: unknown, code: string): boolean {
  return typeof err === "object" && err !== null && (err as { code?: unknown }).code === code;
}
