/**
 * `/memory` (the last changes to MEMORY.md) and `/memory undo` (the version before back in place;
 * owners only, as `/pairing`: a guest in a group must not be able to roll back what the owner
 * taught). Undoing twice puts the undone version back: each undo is itself a change.
 */
import { lineChanges, type MemoryVersions } from "./versions.js";

export interface MemoryCommandDeps {
  versions: MemoryVersions;
  read(): Promise<string>;
  /** Writes MEMORY.md the usual way (agent/memory.ts writeMemory: versions kept, prompt refreshed). */
  write(text: string): Promise<void>;
}

/** Changes listed by `/memory`. */
const SHOWN = 5;

export async function memoryCommand(
  deps: MemoryCommandDeps,
  args: string,
  isOwner: boolean,
): Promise<string> {
  const word = args.trim().toLowerCase();
  if (word === "undo")
    return isOwner
      ? undo(deps)
      : "Only the owner can undo memory changes (someone in allowFrom or admins of this channel).";
  if (word !== "")
    return "Usage: /memory (the last changes) or /memory undo (put back the version before the last change).";
  return changeLog(deps);
}

async function changeLog(deps: MemoryCommandDeps): Promise<string> {
  const current = await deps.read();
  const versions = await deps.versions.list();
  if (versions.length === 0) return `MEMORY.md: ${current.length} characters; no earlier versions kept yet.`;
  const lines = [`MEMORY.md: ${current.length} characters. Last changes, newest first:`];
  const texts = await Promise.all(
    versions.slice(0, SHOWN + 1).map((v) => deps.versions.read(v.id).catch(() => "")),
  );
  for (const [i, version] of versions.slice(0, SHOWN).entries()) {
    const older = texts[i + 1];
    const change = older === undefined ? "first version kept" : describeChange(lineChanges(older, texts[i]!));
    lines.push(
      `- ${version.at.toISOString().slice(0, 16).replace("T", " ")} UTC (${version.reason}): ${change}`,
    );
  }
  lines.push("/memory undo puts back the version before the last change.");
  return lines.join("\n");
}

async function undo(deps: MemoryCommandDeps): Promise<string> {
  const current = await deps.read();
  const previous = await deps.versions.previous(current);
  if (!previous) return "There is no earlier version of MEMORY.md to go back to.";
  await deps.write(previous.text);
  const when = previous.version.at.toISOString().slice(0, 16).replace("T", " ");
  return `Memory restored to the version of ${when} UTC (${describeChange(lineChanges(current, previous.text))}).`;
}

function describeChange({ added, removed }: { added: number; removed: number }): string {
  return `${added} line${added === 1 ? "" : "s"} added, ${removed} removed`;
}
