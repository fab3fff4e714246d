import { homedir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { packageRoot } from "../util/package-root.js";

/** `~` and `~/x` expanded to the home folder; everything else resolved against cwd. */
export function expandHome(path: string, cwd = process.cwd()): string {
  if (path === "~") return homedir();
  if (path.startsWith("~/")) return join(homedir(), path.slice(2));
  return resolve(cwd, path);
}

/** --config, else $PALAVER_CONFIG, else ~/.palaver/config.json. */
export function resolveConfigPath(explicit?: string, env: NodeJS.ProcessEnv = process.env): string {
  return expandHome(explicit ?? env.PALAVER_CONFIG ?? "~/.palaver/config.json");
}

/** Templates copied into a new workspace by `palaver onboard`. */
export function templatesDir(): string {
  return join(packageRoot(), "workspace");
}

/** Skills that ship with palaver; a workspace skill of the same name overrides one. */
export function builtinSkillsDir(): string {
  return join(templatesDir(), "skills");
}

/** Where palaver keeps its own state (not the user's workspace): ~/.palaver by default, beside the config. */
export function stateDir(configPath: string): string {
  return dirname(configPath);
}

/** Where the gateway, the cron tool and `palaver cron` keep the scheduled jobs. */
export function cronStorePath(configPath: string): string {
  return join(stateDir(configPath), "cron", "jobs.json");
}

/** "Always allow this in this chat" approval rules (approvals/chat-rules.ts). */
export function approvalRulesPath(configPath: string): string {
  return join(stateDir(configPath), "approvals", "rules.json");
}

/** Approval and ask_human prompts still open, so a restart can mark them expired (approvals/questions.ts). */
export function openQuestionsPath(configPath: string): string {
  return join(stateDir(configPath), "approvals", "open.json");
}

/** The memory search index (recall/index-db.ts), in the state folder: it can always be rebuilt from the workspace. */
export function memoryIndexPath(stateDir: string): string {
  return join(stateDir, "memory", "index.sqlite");
}

/** Earlier versions of MEMORY.md (recall/versions.ts): out of reach of the model's file and shell tools. */
export function memoryVersionsDir(stateDir: string): string {
  return join(stateDir, "memory", "versions");
}
