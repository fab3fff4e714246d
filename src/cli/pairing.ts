/**
 * `palaver pairing list|approve|revoke`: the newcomers waiting with a pairing code and the people
 * approved, in `<state folder>/pairing/pairing.json` (in cluster mode, the cluster's database:
 * cluster-documents.ts). It works whether or not the gateway runs: a running gateway rereads the
 * file when it changes, so an approval lets the person in at once (and the gateway tells them),
 * and a revoke shuts them out at their next message.
 */
import type { Command } from "commander";
import { stateDir } from "../config/paths.js";
import { formatTime } from "../cron/schedule.js";
import { DOCUMENT_NAMES } from "../db/names.js";
import {
  CODE_TTL_MS,
  PAIRING_DOCUMENT,
  pairingPath,
  PairingStore,
  type ApprovedSender,
  type PendingCode,
} from "../pairing/store.js";
import { addCommonOptions, guarded, loadForCli } from "./common.js";

export function registerPairingCommand(program: Command): void {
  const pairing = program
    .command("pairing")
    .description("let newcomers in by their pairing code, list them, or shut them out again");

  const list = pairing
    .command("list")
    .description("list the codes waiting for approval and the people approved")
    .option("--json", "print both lists as JSON (as stored)")
    .action((opts: { json?: boolean }) =>
      withStore(list, (store) => {
        const pending = store.pending();
        const approved = store.approved();
        if (opts.json) process.stdout.write(`${JSON.stringify({ pending, approved }, null, 2)}\n`);
        else process.stdout.write(`${formatPairing(pending, approved, Date.now())}\n`);
      }),
    );

  const approve = pairing
    .command("approve")
    .description("let in the person who was given this code (they are told, by the gateway)")
    .argument("<code>", "the 8-character code they were given")
    .action((code: string) =>
      withStore(approve, async (store) => {
        const result = await store.approve(code, "cli");
        if (!result.ok) {
          throw new Error(
            result.reason === "malformed"
              ? `"${code}" is not a pairing code: codes are 8 letters and digits, like K7M2QX9B`
              : `no open pairing code ${code.toUpperCase()}: it is mistyped, expired (codes last an hour) or ` +
                  "used already (`palaver pairing list` shows the open ones)",
          );
        }
        const { channel, senderId } = result.approved;
        process.stdout.write(
          `Approved ${channel} user ${senderId}: they can talk to the bot now. A running gateway tells them ` +
            "within a few seconds; otherwise it does at its next start.\n",
        );
      }),
    );

  const revoke = pairing
    .command("revoke")
    .description("shut an approved person out again (their reminders stop too)")
    .argument("<platform>", "telegram, slack, discord ...")
    .argument("<id>", "their user id (see `palaver pairing list`)")
    .action((platform: string, id: string) =>
      withStore(revoke, async (store) => {
        if (!(await store.revoke(platform, id))) {
          throw new Error(
            `${platform} user ${id} was not approved by pairing (\`palaver pairing list\` shows who was); ` +
              `people in channels.${platform}.allowFrom are taken out there`,
          );
        }
        process.stdout.write(
          `Revoked ${platform} user ${id}: their messages are refused from now on, and cron jobs they set ` +
            "are disabled instead of run.\n",
        );
      }),
    );

  for (const cmd of [list, approve, revoke]) addCommonOptions(cmd);
}

/** Runs `work` on the pairing store: the state folder's file, or the cluster's document. */
function withStore(cmd: Command, work: (store: PairingStore) => void | Promise<void>): Promise<void> {
  return guarded(async () => {
    // Info logs would land between the lines this command prints; --verbose brings them back.
    const loaded = loadForCli(cmd, { level: "warn" });
    const url = loaded.config.cluster.database;
    if (url === undefined) return await work(new PairingStore(pairingPath(stateDir(loaded.path))));
    // Loaded here: in one process the command does not load the PostgreSQL client.
    const { withClusterDocument } = await import("./cluster-documents.js");
    await withClusterDocument(url, DOCUMENT_NAMES.pairing, PAIRING_DOCUMENT, (doc) =>
      work(new PairingStore(doc)),
    );
  });
}

/** Pure: both lists as `palaver pairing list` prints them. */
export function formatPairing(
  pending: readonly PendingCode[],
  approved: readonly ApprovedSender[],
  now: number,
  tz?: string,
): string {
  const waiting =
    pending.length === 0
      ? ["No pairing codes are waiting."]
      : table(
          ["CODE", "PLATFORM", "USER", "EXPIRES IN"],
          pending.map((p) => [
            p.code,
            p.channel,
            p.senderId,
            `${Math.max(1, Math.ceil((p.createdAt + CODE_TTL_MS - now) / 60_000))} min`,
          ]),
        );
  const people =
    approved.length === 0
      ? ["Nobody has been approved by pairing yet."]
      : table(
          ["PLATFORM", "USER", "APPROVED", "BY"],
          approved.map((a) => [a.channel, a.senderId, formatTime(a.approvedAt, tz), a.approvedBy]),
        );
  return [...waiting, "", ...people].join("\n");
}

function table(header: string[], rows: string[][]): string[] {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  return [header, ...rows].map((r) =>
    r.map((c, i) => (i === r.length - 1 ? c : c.padEnd(widths[i]!))).join("  "),
  );
}
