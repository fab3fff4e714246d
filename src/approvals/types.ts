/**
 * The approval contract: which tool calls run, which are refused, and which wait for a person's yes.
 * `policy.ts` decides (pure, over the config's rules, the built-in risk rules and the chat's
 * "always allow" rules); `questions.ts` asks in the chat and waits.
 */

export type ApprovalAction = "allow" | "ask" | "deny";

/** One tool call, and where it runs. */
export interface ApprovalRequest {
  tool: string;
  /** The parsed arguments the tool would run with. */
  args: Record<string, unknown>;
  /** The chat the turn answers (for background work: its origin chat). */
  channel: string;
  chatId: string;
  workspace: string;
  /** The tool declares that it changes nothing (read_file, web_search ...). */
  readOnly: boolean;
  /**
   * The untrusted content the turn has read so far (a page's URL, an MCP server, another sender's
   * file): non-empty marks the turn, and its outward calls are asked (outward.ts).
   */
  untrusted?: readonly { tool: string; source: string }[];
  /** What the turn's sender wrote: in a marked turn, a URL or query must be made of these words. */
  senderText?: string;
  /** Whether exec commands can reach the network (tools.exec.network, or no sandbox); unknown counts as yes. */
  execNetwork?: boolean;
}

/**
 * A rule added by "Always allow" on a prompt: this tool in this chat; for exec, this program used
 * in no riskier a way than the approved call (its shape, exec-shape.ts).
 */
export interface ChatRule {
  id: string;
  channel: string;
  chatId: string;
  tool: string;
  /** exec only: the program (first word of the command) it allows. */
  program?: string;
  /**
   * exec only: the kinds of risky use the approved call made (`-i`, `-delete`, `-r` ...); a later
   * call of the program is covered when it makes no others. Rules saved before shapes existed have
   * none, read as the narrowest shape: the program with no risky kind of use at all.
   */
  shape?: string[];
  /** Who added it, and when (ms since epoch). */
  addedBy: string;
  addedAt: number;
}

export interface ApprovalDecision {
  action: ApprovalAction;
  /** Why, in words for the chat ("runs a shell command that is not read-only"). */
  reason: string;
  /** Which layer decided: a config rule (its index), a chat rule, the built-in risk rules, the mode. */
  layer: "rule" | "chat" | "builtin" | "mode";
  /** What "Always allow" would add for this call; absent when it is not offered. */
  always?: Pick<ChatRule, "tool" | "program" | "shape">;
  /** Why "Always allow" is not offered for an asked call that could otherwise have it (`python` runs code ...). */
  alwaysWithheld?: string;
}

export interface ApprovalPolicy {
  decide(request: ApprovalRequest): ApprovalDecision;
}

/** The chat rules added by "Always allow this in this chat", kept in the state folder (0600). */
export interface ChatRuleStore {
  /** Every rule, oldest first. */
  list(): ChatRule[];
  /** The rules of one chat. */
  forChat(channel: string, chatId: string): ChatRule[];
  add(rule: Omit<ChatRule, "id" | "addedAt">): ChatRule | Promise<ChatRule>;
  /** False when no rule has that id. */
  revoke(id: string): boolean | Promise<boolean>;
}
