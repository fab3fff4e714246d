/**
 * "Always allow this in this chat" rules, kept in the state folder
 * (`approvals/rules.json`, 0600 in a 0700 folder) as `{version: 1, rules}`.
 *
 * The gateway adds rules and `palaver approvals revoke` removes them from
 * another process, so every read first compares the file's stamp (mtime,
 * size, inode) with the one last loaded and reloads on a change: a revoke
 * takes effect in a running gateway at its next tool call, with no restart
 * and no watcher. Writes replace the file atomically (a reader sees the old
 * rules or the new ones). A file that cannot be read as rules is moved aside
 * (`rules.json.corrupt-<ms>`) with a warning and the store starts empty:
 * losing "always allow" rules only means being asked again.
 */
import { randomBytes } from "node:crypto";
import {
  closeSync,
  fsyncSync,
  openSync,
  readFileSync,
  renameSync,
  statSync,
  unlinkSync,
  writeSync,
} from "node:fs";
import { dirname } from "node:path";
import { z } from "zod";
import { logger, type Logger } from "../log.js";
import { errorMessage } from "../util/errors.js";
import { mkdirPrivateSync, PRIVATE_FILE_MODE } from "../util/private-fs.js";
import type { ChatRule, ChatRuleStore } from "./types.js";

const ChatRuleSchema = z.object({
  id: z.string().min(1),
  channel: z.string(),
  chatId: z.string(),
  tool: z.string().min(1),
  program: z.string().min(1).optional(),
  addedBy: z.string(),
  addedAt: z.number(),
});

const RulesFileSchema = z.object({
  version: z.literal(1),
  rules: z.array(ChatRuleSchema),
});

/** What identifies one version of the file; "missing" when there is none. */
type Stamp = string;

export class FileChatRules implements ChatRuleStore {
  private rules: ChatRule[] = [];
  private stamp: Stamp | null = null;
  /** The last read failure, warned about once. */
  private readError: string | null = null;
  private readonly log: Logger;

  /** `path`: the rules file in the state folder (config/paths.ts approvalRulesPath). */
  constructor(
    readonly path: string,
    log?: Logger,
  ) {
    this.log = log ?? logger("approvals");
  }

  list(): ChatRule[] {
    this.refresh();
    return [...this.rules];
  }

  forChat(channel: string, chatId: string): ChatRule[] {
    this.refresh();
    return this.rules.filter((r) => r.channel === channel && r.chatId === chatId);
  }

  add(rule: Omit<ChatRule, "id" | "addedAt">): ChatRule {
    this.refresh(true);
    const added: ChatRule = { ...rule, id: this.newId(), addedAt: Date.now() };
    if (added.program === undefined) delete added.program;
    this.save([...this.rules, added]);
    return added;
  }

  revoke(id: string): boolean {
    this.refresh(true);
    const kept = this.rules.filter((r) => r.id !== id);
    if (kept.length === this.rules.length) return false;
    this.save(kept);
    return true;
  }

  /**
   * Reloads when the file changed since it was last read or written (one
   * statSync otherwise). A file that cannot be read at all (permissions) keeps
   * the rules last read, with a warning, and is tried again at the next call:
   * a tool call never fails for it. `strict` (before a write) throws instead,
   * so rules that could not be read are never overwritten.
   */
  private refresh(strict = false): void {
    try {
      const stamp = stampOf(this.path);
      if (stamp === this.stamp) return;
      this.rules = stamp === "missing" ? [] : this.read();
      this.stamp = stampOf(this.path);
      this.readError = null;
    } catch (err) {
      if (strict) throw err;
      const why = errorMessage(err);
      if (why !== this.readError)
        this.log.warn({ path: this.path, err: why }, "cannot read the approval rules file");
      this.readError = why;
    }
  }

  private read(): ChatRule[] {
    let text: string;
    try {
      text = readFileSync(this.path, "utf8");
    } catch (err) {
      // Removed between the stat and the read: no rules.
      if ((err as NodeJS.ErrnoException).code === "ENOENT") return [];
      throw err;
    }
    let problem: string;
    try {
      const parsed = RulesFileSchema.safeParse(JSON.parse(text));
      if (parsed.success) return parsed.data.rules.map(withoutUndefined);
      problem = parsed.error.issues
        .map((i) => `${i.path.join(".") || "(top level)"}: ${i.message}`)
        .join("; ");
    } catch (err) {
      problem = `not JSON: ${(err as Error).message}`;
    }
    const aside = `${this.path}.corrupt-${Date.now()}`;
    try {
      renameSync(this.path, aside);
    } catch (err) {
      // Another process (the gateway, the CLI) moved or replaced it first.
      if ((err as NodeJS.ErrnoException).code !== "ENOENT") throw err;
    }
    this.log.warn(
      { path: this.path, movedTo: aside, problem },
      "the approval rules file is not valid; moved it aside and starting with no 'always allow' rules",
    );
    return [];
  }

  private save(rules: ChatRule[]): void {
    mkdirPrivateSync(dirname(this.path));
    replaceSync(this.path, `${JSON.stringify({ version: 1, rules }, null, 2)}\n`);
    this.rules = rules;
    this.stamp = stampOf(this.path);
  }

  /** 8 hex characters, unique among the current rules. */
  private newId(): string {
    for (;;) {
      const id = randomBytes(4).toString("hex");
      if (!this.rules.some((r) => r.id === id)) return id;
    }
  }
}

function stampOf(path: string): Stamp {
  try {
    const st = statSync(path);
    // The inode changes with every atomic replacement, so two writes within one mtime tick still differ.
    return `${st.mtimeMs}:${st.size}:${st.ino}`;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return "missing";
    throw err;
  }
}

/** zod gives `program: undefined` for nothing; the stored shape leaves it out. */
function withoutUndefined(rule: ChatRule): ChatRule {
  if (rule.program === undefined) delete rule.program;
  return rule;
}

/**
 * util/private-fs.ts replaceFilePrivate, synchronously: the store's interface
 * is synchronous (the policy decides without awaiting) and the file is small.
 */
function replaceSync(path: string, data: string): void {
  const tmp = `${path}.${process.pid}.${randomBytes(4).toString("hex")}.tmp`;
  try {
    const fd = openSync(tmp, "wx", PRIVATE_FILE_MODE);
    try {
      writeSync(fd, data);
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
    renameSync(tmp, path);
  } catch (err) {
    try {
      unlinkSync(tmp);
    } catch {
      // Never created, or already renamed.
    }
    throw err;
  }
}
