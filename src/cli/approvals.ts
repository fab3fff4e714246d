/**
 * `palaver approvals list|revoke`: the "Always allow this in this chat" rules
 * kept in `<config folder>/approvals/rules.json` (in cluster mode, the cluster's
 * database: cluster-documents.ts). A running gateway rereads the file when it
 * changes, so a revoke takes effect at its next tool call.
 */
import type { Command } from "commander";
import { CHAT_RULES_DOCUMENT, FileChatRules } from "../approvals/chat-rules.js";
import { ruleCovers } from "../approvals/exec-shape.js";
import type { ChatRule } from "../approvals/types.js";
import { approvalRulesPath } from "../config/paths.js";
import { formatTime } from "../cron/schedule.js";
import { DOCUMENT_NAMES } from "../db/names.js";
import { addCommonOptions, guarded, loadForCli } from "./common.js";

export function registerApprovalsCommand(program: Command): void {
  const approvals = program
    .command("approvals")
    .description('list and revoke the "Always allow this in this chat" approval rules');

  const list = approvals
    .command("list")
    .description("list the rules, oldest first")
    .option("--json", "print the rules as JSON (as stored)")
    .action((opts: { json?: boolean }) =>
      withRules(list, (store) => {
        const rules = store.list();
        if (opts.json) process.stdout.write(`${JSON.stringify(rules, null, 2)}\n`);
        else process.stdout.write(`${formatRuleTable(rules)}\n`);
      }),
    );

  const revoke = approvals
    .command("revoke")
    .description("remove a rule: its tool (or program) is asked again in that chat")
    .argument("<id>", "the rule id (see `palaver approvals list`)")
    .action((id: string) =>
      withRules(revoke, async (store) => {
        const rule = store.list().find((r) => r.id === id);
        if (!rule || !(await store.revoke(id))) {
          throw new Error(`no approval rule with id ${id} (\`palaver approvals list\` shows them)`);
        }
        process.stdout.write(
          `Revoked rule ${id}: ${what(rule)} is asked again in ${rule.channel}:${rule.chatId}\n`,
        );
      }),
    );

  for (const cmd of [list, revoke]) addCommonOptions(cmd);
}

/** Runs `work` on the rules: the state folder's file, or the cluster's document. */
function withRules(cmd: Command, work: (store: FileChatRules) => void | Promise<void>): Promise<void> {
  return guarded(async () => {
    // Info logs would land between the lines this command prints; --verbose brings them back.
    const loaded = loadForCli(cmd, { level: "warn" });
    const url = loaded.config.cluster.database;
    if (url === undefined) return await work(new FileChatRules(approvalRulesPath(loaded.path)));
    // Loaded here: in one process the command does not load the PostgreSQL client.
    const { withClusterDocument } = await import("./cluster-documents.js");
    await withClusterDocument(url, DOCUMENT_NAMES.approvalRules, CHAT_RULES_DOCUMENT, (doc) =>
      work(new FileChatRules(doc)),
    );
  });
}

function what(rule: ChatRule): string {
  return rule.program ? `${rule.tool} ${rule.program}` : rule.tool;
}

/** Pure: the rules as a table for `palaver approvals list`. */
export function formatRuleTable(rules: ChatRule[], tz?: string): string {
  if (rules.length === 0) {
    return 'No approval rules. "Always allow this in this chat" on an approval prompt adds one.';
  }
  const header = ["ID", "CHAT", "TOOL", "ADDED BY", "WHEN", "COVERS"];
  const rows = rules.map((r) => [
    r.id,
    `${r.channel}:${r.chatId}`,
    r.tool,
    r.addedBy || "-",
    formatTime(r.addedAt, tz),
    ruleCovers(r),
  ]);
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  return [header, ...rows]
    .map((r) => r.map((c, i) => (i === r.length - 1 ? c : c.padEnd(widths[i]!))).join("  "))
    .join("\n");
}
