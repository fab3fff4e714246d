/**
 * How risky a shell command is, judged from its text alone (pure). The
 * approval policy allows a command without asking only when it is one plain
 * command (no operators, redirections, substitutions or variables) whose
 * program is on a short read-only list and whose options write nothing.
 * Anything this module cannot read with certainty counts as risky: the cost of
 * a wrong "risky" is one question in the chat, of a wrong "read-only" a command
 * nobody approved.
 */

/**
 * Characters that make a command more than one plain command when they stand
 * outside single quotes: `;` `&` `|` (several commands), `<` `>` (redirections),
 * `(` `)` (subshells), backtick and `$` (command substitution, and variables:
 * `$CMD`, `${X:=y}` and `$(...)` all mean the words cannot be read from the
 * text, so every `$` counts).
 */
const META = new Set([";", "&", "|", "<", ">", "(", ")", "`", "$"]);
/** Inside double quotes the shell still expands these. */
const META_IN_DOUBLE = new Set(["`", "$"]);
/** Newlines start another command; other control characters have no business in a command line. */
// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u0008\u000a-\u001f\u007f]/;

/**
 * True when the command holds anything that makes it more than one plain
 * command: `; & | < > ( )`, a backtick or `$` outside single quotes, or a
 * newline (or another control character) anywhere. Quoted text is data:
 * `grep "a;b" x` has none.
 */
export function hasShellMetacharacters(command: string): boolean {
  return scan(command).meta;
}

/**
 * The words of a single plain command, quotes removed (`grep "a b" x` →
 * grep, a b, x), or null when it is not one: metacharacters (see
 * hasShellMetacharacters), an unterminated quote or a trailing backslash, or
 * nothing at all.
 */
export function plainWords(command: string): string[] | null {
  const r = scan(command);
  return r.meta || r.unterminated || r.words.length === 0 ? null : r.words;
}

/** A program as a plain command names it: a bare name looked up on PATH, nothing else. */
const PROGRAM_NAME = /^[A-Za-z0-9_][A-Za-z0-9._+-]*$/;

/**
 * The program a single plain command runs, or null when the command is not
 * plain or its first word is odd: a variable assignment (`FOO=1 rm x`), a
 * glob, or a path. A path is refused on purpose rather than cut to its
 * basename: `./ls` may be a script the model just wrote, and must not pass for
 * `ls`.
 */
export function programOf(command: string): string | null {
  const words = plainWords(command);
  const first = words?.[0];
  return first !== undefined && PROGRAM_NAME.test(first) ? first : null;
}

/**
 * Programs that run another command given as their arguments (or as a
 * script): "always allow sudo" would allow everything, so the policy offers
 * no "always" for them.
 */
const RUNS_OTHERS = new Set([
  "sudo",
  "doas",
  "su",
  "env",
  "nice",
  "ionice",
  "timeout",
  "stdbuf",
  "nohup",
  "setsid",
  "time",
  "exec",
  "eval",
  "command",
  "builtin",
  "busybox",
  "xargs",
  "parallel",
  "watch",
  "flock",
  "chroot",
  "unshare",
  "nsenter",
  "sh",
  "bash",
  "dash",
  "zsh",
  "ksh",
  "fish",
  "source",
  ".",
]);

/** Whether "always allow this program in this chat" means anything narrower than "allow every command". */
export function isNarrowProgram(program: string): boolean {
  return !RUNS_OTHERS.has(program);
}

/** Read-only checks by program: the arguments (after the program) that keep a call read-only. */
const READ_ONLY: Record<string, (args: string[]) => boolean> = {
  ls: () => true,
  cat: () => true,
  head: () => true,
  tail: () => true,
  grep: () => true,
  egrep: () => true,
  fgrep: () => true,
  // --pre runs a program on every file searched.
  rg: (args) => !hasLong(args, "--pre"),
  wc: () => true,
  pwd: () => true,
  echo: () => true,
  // -s/--set changes the clock (d, f, r and I take a value, so an `s` after them is not the option).
  date: (args) => !hasShort(args, "s", "dfrI") && !hasLong(args, "--set"),
  find: (args) => !args.some((a) => FIND_WRITES.test(a)),
  stat: () => true,
  // -C compiles a magic file (writes magic.mgc).
  file: (args) => !hasShort(args, "C", "mfFeP") && !hasLong(args, "--compile"),
  du: () => true,
  df: () => true,
  whoami: () => true,
  uname: () => true,
  which: () => true,
  // -o writes the listing to a file; -R runs tree again in every folder with -o 00Tree.html.
  tree: (args) => !hasShort(args, "oR", "LPIHT") && !hasLong(args, "--output"),
  // -o writes the result to a file; --compress-program runs one.
  sort: (args) =>
    !hasShort(args, "o", "ktST") && !hasLong(args, "--output") && !hasLong(args, "--compress-program"),
  // A second file name is the output file.
  uniq: (args) => args.filter((a) => !a.startsWith("-")).length < 2,
  cut: () => true,
  diff: () => true,
  // Not git, even `git status`: git obeys the repository's own config, which can name programs
  // (core.fsmonitor, diff.external), and the model may write that config inside the workspace.
};

/** find's actions that run commands or write files. */
const FIND_WRITES = /^-(exec|execdir|ok|okdir|delete|fprint|fprint0|fprintf|fls)$/;

/** `--name` or `--name=value` among the arguments. */
function hasLong(args: string[], name: string): boolean {
  return args.some((a) => a === name || a.startsWith(`${name}=`));
}

/**
 * One of the short options `flags` among clusters such as `-uo`; letters in
 * `takesValue` end a cluster (the rest of the word is their value, as in `-tX`).
 */
function hasShort(args: string[], flags: string, takesValue: string): boolean {
  for (const a of args) {
    if (!/^-[^-]/.test(a)) continue;
    for (const ch of a.slice(1)) {
      if (flags.includes(ch)) return true;
      if (takesValue.includes(ch)) break;
    }
  }
  return false;
}

/**
 * True when the command is a single plain command whose program is on the
 * read-only list with no option that writes or runs something
 * (`find -exec/-delete`, `sort -o` ...).
 */
export function isReadOnlyCommand(command: string): boolean {
  const program = programOf(command);
  if (program === null) return false;
  const check = READ_ONLY[program];
  return check !== undefined && check(plainWords(command)!.slice(1));
}

interface Scan {
  words: string[];
  meta: boolean;
  unterminated: boolean;
}

/** A small sh word splitter: quotes and backslashes as sh reads them, metacharacters noted. */
function scan(command: string): Scan {
  const words: string[] = [];
  let meta = CONTROL.test(command);
  // `started` tells an empty quoted word ("") from no word at all.
  let word = "";
  let started = false;
  let quote: "'" | '"' | null = null;
  for (let i = 0; i < command.length; i++) {
    const ch = command[i]!;
    if (quote === "'") {
      if (ch === "'") quote = null;
      else word += ch;
      continue;
    }
    if (quote === '"') {
      if (ch === '"') quote = null;
      else if (ch === "\\" && i + 1 < command.length && '"\\$`'.includes(command[i + 1]!))
        word += command[++i];
      else {
        if (META_IN_DOUBLE.has(ch)) meta = true;
        word += ch;
      }
      continue;
    }
    if (ch === " " || ch === "\t") {
      if (started) words.push(word);
      word = "";
      started = false;
      continue;
    }
    started = true;
    if (ch === "'" || ch === '"') quote = ch;
    else if (ch === "\\") {
      if (i + 1 >= command.length) return { words, meta, unterminated: true };
      word += command[++i]!;
    } else {
      if (META.has(ch)) meta = true;
      word += ch;
    }
  }
  if (quote !== null) return { words, meta, unterminated: true };
  if (started) words.push(word);
  return { words, meta, unterminated: false };
}
