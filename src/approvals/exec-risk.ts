/**
 * How risky a shell command is, judged from its text alone (pure). The
 * approval policy allows a command without asking only when it is one plain
 * command (no operators, redirections, substitutions or variables) whose
 * program is on a short read-only list and whose options are all on that
 * program's allow-list (read-only-programs.ts).
 * Anything this module cannot read with certainty counts as risky: the cost of
 * a wrong "risky" is one question in the chat, of a wrong "read-only" a command
 * nobody approved.
 */
import { readOptions } from "./gnu-options.js";
import { FIND_READ_ONLY, PRINTS_ARGUMENTS, READ_ONLY_PROGRAMS } from "./read-only-programs.js";

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
  return shellWords(command)?.map((w) => w.text) ?? null;
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

/** A word of a plain command, and whether the shell may turn it into something else. */
export interface ShellWord {
  /** The word with its quotes removed. */
  text: string;
  /**
   * An unquoted glob or brace (`*` `?` `[` `{`) that may expand to a name
   * starting with `-`: only a word whose first character is fixed and
   * cannot start an option (`notes/*.md`, `./*`) is safe. A file in the
   * workspace named `--compress-program=sh` reaches a command only this way.
   */
  optionGlob: boolean;
}

/** The words of a single plain command (see plainWords), with what their globs may expand to. */
export function shellWords(command: string): ShellWord[] | null {
  const r = scan(command);
  return r.meta || r.unterminated || r.words.length === 0 ? null : r.words;
}

/**
 * True when the command is a single plain command whose program is on the
 * read-only list (read-only-programs.ts) and uses only options on that
 * program's allow-list, with no glob that could expand to an option.
 */
export function isReadOnlyCommand(command: string): boolean {
  return readOnlyVerdict(command) === null;
}

/** Why a command is not read-only, or null when it is. */
function readOnlyVerdict(command: string): string | null {
  const program = programOf(command);
  if (program === null) return "not one plain command";
  const words = shellWords(command)!;
  const args = words.slice(1);
  if (args.some((w) => w.optionGlob)) return "a glob that could expand to an option";
  const texts = args.map((w) => w.text);
  if (PRINTS_ARGUMENTS.has(program)) return null;
  if (program === "find") return findVerdict(texts);
  const table = Object.hasOwn(READ_ONLY_PROGRAMS, program) ? READ_ONLY_PROGRAMS[program] : undefined;
  if (table === undefined) return `${program} is not on the read-only list`;
  const read = readOptions(texts, table);
  if (!read.readOnly) return read.why;
  return table.operandsWrite?.(read.operands) ? "an operand it writes to" : null;
}

/** find's expression against FIND_READ_ONLY: every `-word` a known read-only primary. */
function findVerdict(args: readonly string[]): string | null {
  for (let i = 0; i < args.length; i++) {
    const arg = args[i]!;
    const takes =
      FIND_READ_ONLY.get(arg) ??
      (/^-newer[aBcmt][aBcmt]$/.test(arg) ? 1 : /^-O\d+$/.test(arg) ? 0 : undefined);
    if (takes !== undefined) i += takes;
    else if (arg.startsWith("-")) return `find ${arg}`;
  }
  return null;
}

interface Scan {
  words: ShellWord[];
  meta: boolean;
  unterminated: boolean;
}

/**
 * Characters that make the shell expand an unquoted word into file names
 * (globs) or several words (bash's braces: a `{` counts only in a word with a
 * `,` or `..`, as `{a,b}` and `{1..3}` expand and find's `{}` does not).
 */
const EXPANDS = new Set(["*", "?", "["]);
/** A fixed first character that no expansion can turn into an option (`-`) or a find operator. */
const SAFE_START = /[\w./~]/;

/** A small sh word splitter: quotes and backslashes as sh reads them, metacharacters and globs noted. */
function scan(command: string): Scan {
  const words: ShellWord[] = [];
  let meta = CONTROL.test(command);
  // `started` tells an empty quoted word ("") from no word at all.
  let word = "";
  let started = false;
  // Whether the word's first character is fixed (quoted, escaped, or not an expansion) and safe.
  let safeStart = false;
  let expands = false;
  let brace = false;
  let quote: "'" | '"' | null = null;
  const add = (ch: string, unquoted: boolean) => {
    const expansion = unquoted && EXPANDS.has(ch);
    if (word === "") safeStart = !expansion && SAFE_START.test(ch);
    if (expansion) expands = true;
    if (unquoted && ch === "{") {
      brace = true;
      if (word === "") safeStart = false;
    }
    word += ch;
  };
  const end = () => {
    const braces = brace && /,|\.\./.test(word);
    if (started) words.push({ text: word, optionGlob: (expands || braces) && !safeStart });
    word = "";
    started = false;
    expands = false;
    brace = false;
  };
  for (let i = 0; i < command.length; i++) {
    const ch = command[i]!;
    if (quote === "'") {
      if (ch === "'") quote = null;
      else add(ch, false);
      continue;
    }
    if (quote === '"') {
      if (ch === '"') quote = null;
      else if (ch === "\\" && i + 1 < command.length && '"\\$`'.includes(command[i + 1]!))
        add(command[++i]!, false);
      else {
        if (META_IN_DOUBLE.has(ch)) meta = true;
        add(ch, false);
      }
      continue;
    }
    if (ch === " " || ch === "\t") {
      end();
      continue;
    }
    started = true;
    if (ch === "'" || ch === '"') quote = ch;
    else if (ch === "\\") {
      if (i + 1 >= command.length) return { words, meta, unterminated: true };
      add(command[++i]!, false);
    } else {
      if (META.has(ch)) meta = true;
      add(ch, true);
    }
  }
  if (quote !== null) return { words, meta, unterminated: true };
  end();
  return { words, meta, unterminated: false };
}
