/**
 * Without the sandbox, tools.restrictToWorkspace can only be approximated for
 * shell commands: a command that names an absolute path outside the
 * workspace, a `..` segment or `~` is refused before it runs. Best effort
 * (a script, a variable or a symlink inside the workspace gets around it);
 * the README says so and points at the sandbox.
 */
import { posix } from "node:path";
import { privateChatReason, type ChatFolders } from "../chat-privacy.js";
import { isInside } from "../../../workspace/paths.js";

/** Characters that end a shell word or start a new one (redirections, pipes, grouping, quotes, `=`). */
const BOUNDARY = String.raw`\s=<>|;&(){}\x60'"`;
const ABSOLUTE = new RegExp(String.raw`(?:^|[${BOUNDARY}])(\/[^${BOUNDARY}]*)`, "g");
const TILDE = new RegExp(String.raw`(?:^|[${BOUNDARY}:])(~[^${BOUNDARY}\/]*)`);
const DOTDOT = new RegExp(String.raw`(?:^|[${BOUNDARY}\/:])\.\.(?=$|[${BOUNDARY}\/])`);

/** Characters that make a word a pattern the shell expands. */
const GLOB = /[*?[]/;

/**
 * Why `command` names another chat's data (the sessions folder, a media
 * folder not the turn's own), or null. Each word is taken as a path against
 * `cwd`; a pattern by its folder part (`sessions/*.jsonl` names sessions/).
 * Best effort like findOutsidePath: a pattern such as `*` in the workspace,
 * a variable or a script gets around it; the sandbox hides those folders.
 */
export function findPrivatePath(command: string, cwd: string, folders: ChatFolders): string | null {
  for (const word of command.split(new RegExp(`[${BOUNDARY}]+`))) {
    if (word === "" || word.startsWith("-") || word.startsWith("~") || word.startsWith("$")) continue;
    const glob = word.search(GLOB);
    const path = glob === -1 ? word : word.slice(0, word.lastIndexOf("/", glob) + 1);
    const reason = privateChatReason(posix.resolve(cwd, path || "."), word, folders);
    if (reason) return reason;
  }
  return null;
}

/** Devices every program may name: discarding output, reading zeros or randomness, its own streams. */
const HARMLESS_FILES = new Set([
  "/dev/null",
  "/dev/zero",
  "/dev/random",
  "/dev/urandom",
  "/dev/stdin",
  "/dev/stdout",
  "/dev/stderr",
  "/dev/tty",
]);
/** Programs named by their full path (`/usr/bin/env python3`, `/bin/sh -c`): reading a program is harmless. */
const PROGRAM_DIRS = ["/bin", "/sbin", "/usr/bin", "/usr/sbin", "/usr/local/bin"];

/**
 * The first thing in `command` that points outside the workspace, described
 * for the refusal message, or null. `workspace` is absolute; paths inside it
 * (also given absolutely) are fine.
 */
export function findOutsidePath(command: string, workspace: string): string | null {
  const tilde = TILDE.exec(command);
  if (tilde) return `${tilde[1]} (the home folder)`;
  if (DOTDOT.test(command)) return "a `..` path segment";
  for (const match of command.matchAll(ABSOLUTE)) {
    const path = match[1]!;
    if (!isAllowedAbsolute(path, workspace)) return path;
  }
  return null;
}

function isAllowedAbsolute(path: string, workspace: string): boolean {
  const normal = posix.normalize(path).replace(/(.)\/+$/, "$1");
  if (isInside(normal, workspace)) return true;
  if (HARMLESS_FILES.has(normal) || /^\/dev\/fd\/\d+$/.test(normal)) return true;
  return PROGRAM_DIRS.some((dir) => normal === dir || posix.dirname(normal) === dir);
}
