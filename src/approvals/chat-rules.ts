/**
 * "Always allow this in this chat" rules, kept in the state folder
 * (`approvals/rules.json`, 0600 in a 0700 folder) as `{version: 1, rules}`; in cluster mode the
 * same value is the row "approval-rules.json" of palaver.documents (db/documents.ts), which every
 * instance reads from memory and changes under a row lock (so the class takes either: see
 * util/shared-document.ts). Adding and revoking are awaited.
 *
 * The gateway adds rules and `palaver approvals revoke` removes them from
 * another process, so every read first compares the file's stamp (mtime,
 * size, inode) with the one last loaded and reloads on a change: a revoke
 * takes effect in a running gateway at its next tool call, with no restart
 * and no watcher. Writes replace the file atomically (a reader sees the old
 * rules or the new ones). A file that cannot be read as rules is moved aside
 * (`rules.json.corrupt-<ms>`) with a warning and the store starts empty:
 * losing "always allow" rules only means being asked again. The file handling
 * is util/state-file.ts, shared with the pairing store.
 */
import { randomBytes } from "node:crypto";
import * as z from "zod";
import { logger, type Logger } from "../log.js";
import type { DocumentKind, SharedDocument } from "../util/shared-document.js";
import { StateFile } from "../util/state-file.js";
import type { ChatRule, ChatRuleStore } from "./types.js";

const ChatRuleSchema = z.object({
  id: z.string().min(1),
  channel: z.string(),
  chatId: z.string(),
  tool: z.string().min(1),
  program: z.string().min(1).optional(),
  // Absent in rules saved before shapes existed: ChatRule.shape says how they are read.
  shape: z.array(z.string()).optional(),
  addedBy: z.string(),
  addedAt: z.number(),
});

const RulesFileSchema = z.object({
  version: z.literal(1),
  rules: z.array(ChatRuleSchema),
});

type RulesFile = z.infer<typeof RulesFileSchema>;

/** The rules document: the file's schema, also the database row's. */
export const CHAT_RULES_DOCUMENT: DocumentKind<RulesFile> = {
  schema: RulesFileSchema,
  empty: () => ({ version: 1, rules: [] }),
  what: "the approval rules file",
  startsAs: "with no 'always allow' rules",
};

export class FileChatRules implements ChatRuleStore {
  private readonly file: SharedDocument<RulesFile>;

  /**
   * `where`: the rules file in the state folder (config/paths.ts approvalRulesPath), or the
   * cluster's document (CHAT_RULES_DOCUMENT).
   */
  constructor(where: string | SharedDocument<RulesFile>, log?: Logger) {
    this.file =
      typeof where === "string"
        ? new StateFile(where, { ...CHAT_RULES_DOCUMENT, log: log ?? logger("approvals") })
        : where;
  }

  /**
   * The rules as the file has them now. A file that cannot be read at all (permissions) keeps the
   * rules last read, with a warning: a tool call never fails for it.
   */
  list(): ChatRule[] {
    return this.file.read().rules.map(withoutUndefined);
  }

  forChat(channel: string, chatId: string): ChatRule[] {
    return this.list().filter((r) => r.channel === channel && r.chatId === chatId);
  }

  /** Throws when the file cannot be read, so rules that could not be read are never overwritten. */
  async add(rule: Omit<ChatRule, "id" | "addedAt">): Promise<ChatRule> {
    return await this.file.update((data) => {
      const added: ChatRule = { ...rule, id: newId(data.rules), addedAt: Date.now() };
      withoutUndefined(added);
      return { next: { version: 1, rules: [...data.rules.map(withoutUndefined), added] }, result: added };
    });
  }

  async revoke(id: string): Promise<boolean> {
    return await this.file.update((data) => {
      const kept = data.rules.filter((r) => r.id !== id);
      if (kept.length === data.rules.length) return { result: false };
      return { next: { version: 1, rules: kept.map(withoutUndefined) }, result: true };
    });
  }
}

/** 8 hex characters, unique among the current rules. */
function newId(rules: readonly ChatRule[]): string {
  for (;;) {
    const id = randomBytes(4).toString("hex");
    if (!rules.some((r) => r.id === id)) return id;
  }
}

/** zod gives `program: undefined` for nothing; the stored rule leaves it out. */
function withoutUndefined(rule: ChatRule): ChatRule {
  if (rule.program === undefined) delete rule.program;
  if (rule.shape === undefined) delete rule.shape;
  return rule;
}
