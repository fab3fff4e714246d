/**
 * Earlier versions of MEMORY.md, so a bad rewrite (consolidation, the model's own edit, a slip of
 * the hand) can be undone. Each version is a whole copy, `<state>/memory/versions/<time>.<why>.md`,
 * in the state folder rather than the workspace: the model's file and shell tools can reach the
 * workspace, and a prompt injection that spoils MEMORY.md must not be able to spoil its undo too.
 * At most MAX_VERSIONS are kept, the oldest removed first.
 */
import { readdir, readFile, unlink } from "node:fs/promises";
import { join } from "node:path";
import { mkdirPrivate, writeFilePrivate } from "../util/private-fs.js";

/** Versions kept; MEMORY.md is small (it goes into every prompt), so this is a few MB at most. */
export const MAX_VERSIONS = 50;

/** Why a version was kept: what changed MEMORY.md, or when the change was noticed. */
export type VersionReason = "start" | "edit" | "write" | "undo" | "restore";

export interface MemoryVersion {
  /** The file name without ".md": what `palaver memory restore` takes. */
  id: string;
  at: Date;
  reason: string;
}

const NAME = /^(\d{13})-(\d{3})\.([a-z]+)\.md$/;

export class MemoryVersions {
  /** Orders versions written in the same millisecond. */
  private seq = 0;

  constructor(readonly dir: string) {}

  /** Newest first. */
  async list(): Promise<MemoryVersion[]> {
    let names: string[];
    try {
      names = await readdir(this.dir);
    } catch {
      return [];
    }
    const out: MemoryVersion[] = [];
    for (const name of names) {
      const m = NAME.exec(name);
      if (m) out.push({ id: name.slice(0, -3), at: new Date(Number(m[1])), reason: m[3]! });
    }
    return out.sort((a, b) => (a.id < b.id ? 1 : -1));
  }

  read(id: string): Promise<string> {
    if (!NAME.test(`${id}.md`))
      return Promise.reject(new Error(`no memory version "${id}" (see \`palaver memory log\`)`));
    return readFile(join(this.dir, `${id}.md`), "utf8").catch((err: unknown) => {
      throw new Error(`no memory version "${id}" (see \`palaver memory log\`)`, { cause: err });
    });
  }

  /** Keeps `text` as a version unless it is what the newest version already holds; true when kept. */
  async keep(text: string, reason: VersionReason): Promise<boolean> {
    const newest = (await this.list())[0];
    if (newest && (await this.read(newest.id).catch(() => undefined)) === text) return false;
    await mkdirPrivate(this.dir);
    const id = `${Date.now()}-${String(this.seq++ % 1000).padStart(3, "0")}`;
    await writeFilePrivate(join(this.dir, `${id}.${reason}.md`), text);
    const all = await this.list();
    for (const old of all.slice(MAX_VERSIONS))
      await unlink(join(this.dir, `${old.id}.md`)).catch(() => undefined);
    return true;
  }

  /** The newest version whose text differs from `current`: what an undo goes back to. */
  async previous(current: string): Promise<{ version: MemoryVersion; text: string } | undefined> {
    for (const version of await this.list()) {
      const text = await this.read(version.id).catch(() => undefined);
      if (text !== undefined && text !== current) return { version, text };
    }
    return undefined;
  }
}

/** Lines added and removed between two texts (as multisets of lines): the size of a change, for the log. */
export function lineChanges(before: string, after: string): { added: number; removed: number } {
  const count = new Map<string, number>();
  for (const line of before.split("\n")) count.set(line, (count.get(line) ?? 0) + 1);
  let added = 0;
  for (const line of after.split("\n")) {
    const n = count.get(line) ?? 0;
    if (n > 0) count.set(line, n - 1);
    else added++;
  }
  let removed = 0;
  for (const n of count.values()) removed += n;
  return { added, removed };
}
