/**
 * `palaver outbox list|drop`: the replies not yet delivered, kept in the gateway's message journal
 * (`<state folder>/journal/messages.jsonl`): those held for a channel that is not running (a
 * reminder to a platform that is not enabled) and those still being retried. It works whether or
 * not the gateway runs: a drop is a line the running gateway reads before it sends (see
 * daemon/outbox-file.ts), so a dropped reply is never delivered.
 */
import type { Command } from "commander";
import { stateDir } from "../config/paths.js";
import { dropFromOutbox, messageJournalPath, readOutbox, type OutboxEntry } from "../daemon/outbox-file.js";
import { addCommonOptions, guarded, loadForCli } from "./common.js";

const DROP_REASON = "dropped with `palaver outbox drop`";
const PREVIEW_CHARS = 40;

interface DropOptions {
  channel?: string;
  all?: boolean;
}

export function registerOutboxCommand(program: Command): void {
  const outbox = program
    .command("outbox")
    .description("list or drop replies not yet delivered (held for a channel that is not running)");

  const list = outbox
    .command("list")
    .description("list the replies waiting to be delivered, oldest first")
    .option("--json", "print them as JSON (as journaled)")
    .action((opts: { json?: boolean }) =>
      guarded(() => {
        const entries = readOutbox(journalOf(list));
        if (opts.json) process.stdout.write(`${JSON.stringify(entries, null, 2)}\n`);
        else process.stdout.write(`${formatOutbox(entries, Date.now())}\n`);
      }),
    );

  const drop = outbox
    .command("drop")
    .description("drop waiting replies so they are never delivered: by id, or --channel NAME, or --all")
    .argument("[ids...]", "reply ids (see `palaver outbox list`; a unique start of one is enough)")
    .option("--channel <name>", "every reply waiting for this channel")
    .option("--all", "every waiting reply")
    .action((ids: string[], opts: DropOptions) =>
      guarded(() => {
        const path = journalOf(drop);
        const chosen = chooseEntries(readOutbox(path), ids, opts);
        const dropped = dropFromOutbox(
          path,
          chosen.map((e) => e.id),
          DROP_REASON,
        );
        const n = dropped.length;
        process.stdout.write(
          n === 0
            ? "Nothing dropped: no waiting reply matched (`palaver outbox list` shows them).\n"
            : `Dropped ${n} ${n === 1 ? "reply" : "replies"}: ${dropped.map(shortId).join(", ")}\n`,
        );
      }),
    );

  for (const cmd of [list, drop]) addCommonOptions(cmd);
}

function journalOf(cmd: Command): string {
  // Info logs would land between the lines this command prints; --verbose brings them back.
  const loaded = loadForCli(cmd, { level: "warn" });
  return messageJournalPath(stateDir(loaded.path));
}

/** Pure: the entries `palaver outbox drop` means, or an error that says how to say it. */
export function chooseEntries(
  entries: OutboxEntry[],
  ids: readonly string[],
  opts: DropOptions,
): OutboxEntry[] {
  const ways = [ids.length > 0, opts.channel !== undefined, opts.all === true].filter(Boolean).length;
  if (ways !== 1) {
    throw new Error("say which replies to drop: their ids, or --channel NAME, or --all (one of them)");
  }
  if (opts.all) return entries;
  if (opts.channel !== undefined) return entries.filter((e) => e.msg.channel === opts.channel);
  return ids.map((id) => {
    const matches = entries.filter((e) => e.id.startsWith(id));
    if (matches.length === 1) return matches[0]!;
    throw new Error(
      matches.length === 0
        ? `no waiting reply with id ${id} (\`palaver outbox list\` shows them; it may have been sent meanwhile)`
        : `${id} is the start of ${matches.length} reply ids: give more of it`,
    );
  });
}

/** Pure: the waiting replies as a table for `palaver outbox list`. */
export function formatOutbox(entries: OutboxEntry[], now: number): string {
  if (entries.length === 0) return "No replies waiting: everything was delivered.";
  const rows = entries.map((e) => [
    shortId(e.id),
    e.msg.channel,
    e.msg.chatId,
    e.at !== undefined ? formatAge(now - e.at) : "-",
    firstWords(e.msg.content),
  ]);
  const header = ["ID", "CHANNEL", "CHAT", "AGE", "TEXT"];
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const table = [header, ...rows]
    .map((r) => r.map((c, i) => (i === r.length - 1 ? c : c.padEnd(widths[i]!))).join("  "))
    .join("\n");
  return `${table}\n\nDrop with \`palaver outbox drop ID\`, \`--channel NAME\` or \`--all\`.`;
}

/** The first 8 characters of a reply id: enough to tell them apart, and accepted by drop. */
function shortId(id: string): string {
  return id.slice(0, 8);
}

function firstWords(text: string): string {
  const flat = text.replace(/\s+/g, " ").trim();
  return flat.length > PREVIEW_CHARS ? `${flat.slice(0, PREVIEW_CHARS)}…` : flat;
}

/** Pure: a duration as the largest unit that fits ("45s", "12m", "3h", "2d"). */
export function formatAge(ms: number): string {
  const s = Math.max(0, Math.floor(ms / 1000));
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m`;
  if (s < 86_400) return `${Math.floor(s / 3600)}h`;
  return `${Math.floor(s / 86_400)}d`;
}
