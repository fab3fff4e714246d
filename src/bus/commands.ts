/** Chat commands: the same on every channel. Pure parsing and help text. */

export const COMMANDS = {
  new: "save what this conversation taught into memory (MEMORY.md, HISTORY.md), then start fresh",
  stop: "cancel what is running in this chat",
  status: "show model, session and memory size",
  usage: "tokens and cost of this conversation today and this month (the owner also sees the whole bot)",
  help: "list these commands",
  memory: "show recent changes to long-term memory; /memory undo restores the one before",
} as const;

/** Commands for the owner only; not offered in the platforms' command menus. */
export const OWNER_COMMANDS = {
  pairing: "let a newcomer in: /pairing approve <code> (the code they were given); /pairing list",
  agent: "list the named agents; /agent <name> switches this conversation to one (agents.allowSwitch)",
} as const;

export type CommandName = keyof typeof COMMANDS | keyof typeof OWNER_COMMANDS;

/** Whether `word` (lower case, no slash) names a chat command. */
export function isCommandName(word: string): word is CommandName {
  return Object.hasOwn(COMMANDS, word) || Object.hasOwn(OWNER_COMMANDS, word);
}

export interface ParsedCommand {
  name: CommandName;
  args: string;
}

/**
 * `/new`, `/stop now`, `/new@palaver_bot` (Telegram groups) → a command.
 * Anything else, including unknown `/commands`, is null and goes to the model as text.
 */
export function parseCommand(text: string): ParsedCommand | null {
  const match = /^\/([a-z]+)(?:@\S+)?(?:\s+([\s\S]*))?$/i.exec(text.trim());
  if (!match) return null;
  const name = match[1]!.toLowerCase();
  if (!isCommandName(name)) return null;
  return { name, args: (match[2] ?? "").trim() };
}

export function helpText(): string {
  const lines = Object.entries(COMMANDS).map(([name, what]) => `/${name} — ${what}`);
  const owner = Object.entries(OWNER_COMMANDS).map(([name, what]) => `/${name} — ${what}`);
  return [
    "Commands:",
    ...lines,
    "",
    "For the owner:",
    ...owner,
    "",
    "Anything else is a message to the assistant.",
  ].join("\n");
}
