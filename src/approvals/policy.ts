/** PLACEHOLDER (the h-policy branch replaces this file): decides which tool calls run, ask or are refused. */
import type { z } from "zod";
import type { ApprovalSchema } from "../config/schema.js";
import type { ApprovalPolicy, ChatRuleStore } from "./types.js";

export type ApprovalConfig = z.infer<typeof ApprovalSchema>;

export interface PolicyOptions {
  chatRules: ChatRuleStore;
  /** tools.restrictToWorkspace: file writes outside the workspace are possible only when false. */
  restrictToWorkspace: boolean;
  /** tools.exec.denyPatterns, added to the built-in destructive guard. */
  denyPatterns: readonly string[];
}

export function createApprovalPolicy(config: ApprovalConfig, opts: PolicyOptions): ApprovalPolicy {
  void opts;
  return {
    decide: () => ({ action: config.mode === "off" ? "allow" : "ask", reason: "placeholder", layer: "mode" }),
  };
}
