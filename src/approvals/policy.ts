/**
 * The approval policy: whether a tool call runs, waits for a person's yes, or
 * is refused. Pure and synchronous (globs and regular expressions are compiled
 * once, in createApprovalPolicy); layers are checked in order and the first
 * that decides wins:
 *
 *   rule     the config's `tools.approval.rules`, in order
 *   builtin  exec commands the destructive guard refuses: denied without asking
 *   builtin  outward calls (outward.ts): asked in risky and all, never "always allowed"
 *   chat     "Always allow this in this chat" rules
 *   mode     "off": everything else is allowed
 *   builtin  risk: exec asks unless read-only, writes outside the workspace ask
 *   mode     "risky": allow; "all": ask unless the tool is read-only
 */
import { homedir } from "node:os";
import { join, resolve } from "node:path";
import type { z } from "zod";
import { findDestructive } from "../workspace/exec-guard.js";
import { isInside } from "../workspace/paths.js";
import { resolveConfigPath, stateDir as stateDirOf } from "../config/paths.js";
import type { ApprovalRuleSchema, ApprovalSchema } from "../config/schema.js";
import { formatPath } from "../config/schema-walk.js";
import { ConfigError } from "../util/errors.js";
import { globToRegExp } from "../util/glob.js";
import { isReadOnlyCommand, plainWords, programOf } from "./exec-risk.js";
import { execShape, shapeCovers, type ExecShape } from "./exec-shape.js";
import { outwardRisk } from "./outward.js";
import type { ApprovalDecision, ApprovalPolicy, ApprovalRequest, ChatRuleStore } from "./types.js";

export type ApprovalConfig = z.infer<typeof ApprovalSchema>;
type ApprovalRule = z.infer<typeof ApprovalRuleSchema>;

export interface PolicyOptions {
  chatRules: ChatRuleStore;
  /** tools.restrictToWorkspace: file writes outside the workspace are possible only when false. */
  restrictToWorkspace: boolean;
  /** tools.exec.denyPatterns, added to the built-in destructive guard. */
  denyPatterns: readonly string[];
  /** palaver's state folder, which the destructive guard protects (default: the folder of the default config path). */
  stateDir?: string;
  /** The user's home folder, which the destructive guard protects (default: os.homedir()). */
  home?: string;
}

/** A config rule ready to test: its tool glob and regular expression compiled. */
interface CompiledRule {
  index: number;
  tool: RegExp;
  match: RegExp | null;
  arg: string | undefined;
  action: ApprovalRule["action"];
  reason: string;
}

/**
 * Throws a ConfigError for rules `config check` reports (approvalRuleProblems):
 * a rule that cannot mean what its author wrote must not quietly allow calls.
 */
export function createApprovalPolicy(config: ApprovalConfig, opts: PolicyOptions): ApprovalPolicy {
  const problems = approvalRuleProblems(config);
  if (problems.length > 0) throw new ConfigError("invalid tools.approval.rules", problems);
  const rules = config.rules.map(compileRule);
  // Compiled as exec compiles them (exec.ts), so the policy refuses what exec would.
  const deny = opts.denyPatterns.map((p) => new RegExp(p, "i"));
  const home = opts.home ?? homedir();
  const state = opts.stateDir ?? stateDirOf(resolveConfigPath());

  function decide(req: ApprovalRequest): ApprovalDecision {
    const rule = rules.find((r) => ruleMatches(r, req));
    if (rule) {
      const reason = rule.reason || `rule ${rule.index + 1} of tools.approval.rules`;
      // No "always" here: this rule is checked before chat rules, so one would never take effect.
      return { action: rule.action, reason, layer: "rule" };
    }

    const workspace = resolveIn(process.cwd(), req.workspace, home);
    const command = req.tool === "exec" ? text(req.args.command) : "";
    if (req.tool === "exec") {
      const cwd = resolveIn(workspace, text(req.args.working_dir) || ".", home);
      const why =
        findDestructive(command, { home, workspace, stateDir: state, cwd }) ?? denyPatternHit(command, deny);
      // exec would refuse it too; asking would only let a person approve a call that then fails.
      if (why)
        return { action: "deny", reason: `the destructive guard refuses it: ${why}`, layer: "builtin" };
    }

    // Before the chat rules: "always allow" never covers a call that carries data out (outward.ts).
    const outward = outwardRisk(req, {
      mode: config.mode,
      restrictToWorkspace: opts.restrictToWorkspace,
      home,
    });
    if (outward) return outward;

    const program = req.tool === "exec" ? programOf(command) : null;
    // An exec rule covers a call of its program whose shape is within the approved one (exec-shape.ts).
    const shape = req.tool === "exec" ? execShape(command) : null;
    const chatRule = opts.chatRules
      .forChat(req.channel, req.chatId)
      .find(
        (r) =>
          r.tool === req.tool &&
          (shape === null ||
            ("program" in shape && r.program === shape.program && shapeCovers(r.shape, shape.kinds))),
      );
    if (chatRule) {
      return { action: "allow", reason: `always allowed in this chat (rule ${chatRule.id})`, layer: "chat" };
    }

    if (config.mode === "off") return { action: "allow", reason: "approvals are off", layer: "mode" };

    const decision =
      builtinRisk(req, { command, program, workspace, home }, opts.restrictToWorkspace, config.mode) ??
      modeDefault(req, config.mode);
    if (decision.action !== "ask") return decision;
    const always = alwaysFor(req.tool, shape);
    if (always) return { ...decision, always };
    return shape && "withheld" in shape ? { ...decision, alwaysWithheld: shape.withheld } : decision;
  }

  return { decide };
}

/** The built-in risk rules (modes risky and all), or null when they have nothing to say. */
function builtinRisk(
  req: ApprovalRequest,
  at: { command: string; program: string | null; workspace: string; home: string },
  restrictToWorkspace: boolean,
  mode: "risky" | "all",
): ApprovalDecision | null {
  const { command, program, workspace, home } = at;
  if (req.tool === "exec") {
    if (isReadOnlyCommand(command))
      return { action: "allow", reason: "a read-only command", layer: "builtin" };
    return { action: "ask", reason: execRisk(command, program), layer: "builtin" };
  }
  if (req.tool === "write_file" || req.tool === "edit_file") {
    const target = resolveIn(workspace, text(req.args.path), home);
    // Lexical only (the policy is pure): a symlink inside the workspace is followed by the tool's own check.
    const outside = !isInside(target, workspace);
    // With restrictToWorkspace the tool refuses it with its own, clearer message: no point asking.
    if (outside && !restrictToWorkspace) {
      return { action: "ask", reason: `writes outside the workspace (${target})`, layer: "builtin" };
    }
    if (outside)
      return { action: "allow", reason: "the tool refuses paths outside the workspace", layer: "builtin" };
    return null;
  }
  if (mode === "risky" && (req.tool === "web_fetch" || req.tool.startsWith("mcp_"))) {
    return { action: "allow", reason: "fetches and MCP tools are allowed in mode risky", layer: "builtin" };
  }
  return null;
}

/** Why an exec call is asked, naming the program when there is one. */
function execRisk(command: string, program: string | null): string {
  if (program !== null) return `runs a shell command that changes things (${program})`;
  if (plainWords(command) !== null || command.trim() === "") return "runs a shell command";
  return "runs a shell command that is more than one plain command (; & | < > $ or a backtick)";
}

/** The last layer: risky allows; all asks unless the tool changes nothing. */
function modeDefault(req: ApprovalRequest, mode: "risky" | "all"): ApprovalDecision {
  if (req.readOnly) return { action: "allow", reason: "a read-only tool", layer: "mode" };
  if (mode === "risky") return { action: "allow", reason: "not a risky call", layer: "mode" };
  return { action: "ask", reason: "every tool call is asked (tools.approval.mode all)", layer: "mode" };
}

/**
 * What "Always allow" adds for this call, or undefined when it is not offered: for exec, the
 * program with the call's shape; nothing for a call without one (code runners, find -exec ...).
 */
function alwaysFor(tool: string, shape: ExecShape | null): ApprovalDecision["always"] {
  if (shape === null) return { tool };
  return "program" in shape ? { tool, program: shape.program, shape: shape.kinds } : undefined;
}

function compileRule(rule: ApprovalRule, index: number): CompiledRule {
  return {
    index,
    tool: globToRegExp(rule.tool),
    // The schema has checked the source; case-insensitive like tools.exec.denyPatterns.
    match: rule.match !== undefined ? new RegExp(rule.match, "i") : null,
    arg: rule.arg,
    action: rule.action,
    reason: rule.reason,
  };
}

function ruleMatches(rule: CompiledRule, req: ApprovalRequest): boolean {
  if (!rule.tool.test(req.tool)) return false;
  if (rule.match === null) return true;
  if (rule.arg === undefined) return rule.match.test(JSON.stringify(req.args));
  const value = req.args[rule.arg];
  // An argument the call does not have cannot match; a rule for it says nothing about this call.
  if (value === undefined) return false;
  return rule.match.test(typeof value === "string" ? value : JSON.stringify(value));
}

/**
 * Problems in `tools.approval.rules` that the schema cannot see, in `config
 * check`'s words ("path: what is wrong"). A glob that matches no known tool is
 * fine (an MCP server may be added later).
 */
export function approvalRuleProblems(config: ApprovalConfig): string[] {
  const problems: string[] = [];
  config.rules.forEach((rule, i) => {
    const path = formatPath(["tools", "approval", "rules", i]);
    if (rule.arg !== undefined && rule.match === undefined) {
      problems.push(
        `${path}: "arg" (${rule.arg}) is set without "match"; add the regular expression to test it with, or remove "arg"`,
      );
    }
  });
  return problems;
}

/** A path argument as the file tools take it: `~` is the home folder, relative paths start in the workspace. */
function resolveIn(workspace: string, path: string, home: string): string {
  if (path === "~") return home;
  if (path.startsWith("~/")) return join(home, path.slice(2));
  return resolve(workspace, path);
}

/** Which of tools.exec.denyPatterns the command matches, in the words exec uses. */
function denyPatternHit(command: string, patterns: readonly RegExp[]): string | null {
  const hit = patterns.find((re) => re.test(command));
  return hit ? `it matches the configured deny pattern /${hit.source}/` : null;
}

function text(value: unknown): string {
  return typeof value === "string" ? value : "";
}
