/**
 * The risk shape of a shell command (pure): its program and the risky kinds of
 * use it makes, which is what "Always allow" on an exec prompt remembers. A
 * later call is covered when it runs the same program with no kind of use
 * beyond the approved ones, so approving `find . -name x` never approves
 * `find . -delete`.
 *
 * The kinds, per program:
 * - find: the primaries that write (-delete, -fprint, -fprint0, -fprintf,
 *   -fls) and any primary not known to be read-only;
 * - sed: `-i` (in place, however spelt) and `w` (a w/W command or s///w);
 * - every other program: each option it uses (`-r`, `-f`, `--force`), so a
 *   call with an option not approved asks again.
 *
 * Some calls have no shape that means anything: a program that runs code by
 * design (interpreters, package managers and build tools, git, shells, editors
 * and pagers, programs that run other commands), find with -exec/-ok, sed with
 * `e` or a script it reads from a file, a command that is not one plain
 * command, a glob that could expand to options. For those "Always" is not
 * offered at all, not even for the exact command line: what they run lives in
 * files the model can change (package.json's scripts, a Makefile, the script
 * itself, .git/config), so the same line would not mean the same call later.
 */
import { resolveLong } from "./gnu-options.js";
import { programOf, shellWords } from "./exec-risk.js";
import { FIND_READ_ONLY } from "./read-only-programs.js";
import { sedScriptRisk } from "./sed-script.js";
import type { ChatRule } from "./types.js";

export type ExecShape = { program: string; kinds: string[] } | { withheld: string };

/** Programs that run code by design: no "Always" for them (see the module comment). */
const RUNS_CODE = new Set(
  [
    // Interpreters and compilers (a compiler runs plugins and build scripts).
    "python python2 python3 pypy pypy3 node nodejs deno bun perl ruby irb awk gawk mawk nawk php lua luajit",
    "Rscript julia tclsh wish guile racket ghc runghc gcc g++ cc c++ clang clang++ rustc javac java",
    // Package managers and build tools (their scripts live in workspace files).
    "npm npx pnpm pnpx yarn corepack pip pip3 pipx uv uvx poetry conda gem bundle composer",
    "make cmake ninja meson cargo go gradle gradlew mvn ant bazel dotnet tox nox pytest",
    // git: aliases with `!`, core.pager, hooks and config name programs.
    "git",
    // Shells and programs that run the command they are given.
    "sh bash dash zsh ksh fish csh tcsh busybox source . eval exec command builtin",
    "sudo doas su env nice ionice timeout stdbuf nohup setsid time xargs parallel watch flock",
    "chroot unshare nsenter bwrap systemd-run script expect",
    // Editors and pagers (`:!cmd`, `!cmd`), and man (its pager).
    "vim vi nvim view ex nano emacs less more most man",
    // Archivers and remote copies that run programs (tar --to-command, rsync -e, ssh).
    "tar rsync ssh scp sftp",
    // Containers and schedulers run whatever they are told.
    "docker podman kubectl crontab at batch",
  ].flatMap((line) => line.split(" ")),
);

const FIND_RUNS = new Set(["-exec", "-execdir", "-ok", "-okdir"]);
const FIND_WRITES = ["-delete", "-fprint", "-fprint0", "-fprintf", "-fls"];

/** sed's long options (sed --help, GNU sed 4), for prefixes resolved as sed resolves them. */
const SED_LONG = [
  "quiet silent debug expression file follow-symlinks in-place line-length null-data zero-terminated",
  "posix regexp-extended sandbox separate unbuffered binary help version",
].flatMap((line) => line.split(" "));

/** The shape of a command for "Always allow", or why it has none. */
export function execShape(command: string): ExecShape {
  const program = programOf(command);
  if (program === null) return { withheld: "it is not one plain command" };
  if (RUNS_CODE.has(program)) return { withheld: `${program} runs code that the workspace can change` };
  const words = shellWords(command)!.slice(1);
  if (words.some((w) => w.optionGlob)) return { withheld: "a glob in it could expand to options" };
  const args = words.map((w) => w.text);
  if (program === "find") return findShape(args);
  if (program === "sed") return sedShape(args);
  const kinds = args.flatMap((a) =>
    a.startsWith("--") ? [a.split("=")[0]!] : a.startsWith("-") ? [...a.slice(1)].map((c) => `-${c}`) : [],
  );
  return { program, kinds: unique(kinds) };
}

/** Whether a rule's approved kinds (absent in rules saved before shapes: none) cover a call's. */
export function shapeCovers(approved: readonly string[] | undefined, kinds: readonly string[]): boolean {
  return kinds.every((k) => approved?.includes(k) === true);
}

/** What a chat rule covers, in words for the approval prompt and `palaver approvals list`. */
export function ruleCovers(rule: Pick<ChatRule, "tool" | "program" | "shape">): string {
  if (rule.tool !== "exec") return `every \`${rule.tool}\` call`;
  // Neither is ever saved now; an old file may hold one, which then matches no call.
  if (rule.program === undefined) return "no call (a rule without a program)";
  if (RUNS_CODE.has(rule.program)) return `no call (\`${rule.program}\` runs code; revoke this rule)`;
  return describeShape(rule.program, rule.shape ?? []);
}

function describeShape(program: string, kinds: readonly string[]): string {
  const name = `\`${program}\``;
  if (program === "find") {
    const rest = FIND_WRITES.filter((p) => !kinds.includes(p));
    const unknown = kinds.filter((k) => !FIND_WRITES.includes(k));
    const allowed = [...kinds.filter((k) => FIND_WRITES.includes(k)), ...unknown];
    return `${name} without -exec/-execdir/-ok/-okdir${rest.length ? `, ${rest.join(", ")}` : ""}${
      allowed.length ? `; with ${allowed.join(", ")} allowed` : ""
    }`;
  }
  if (program === "sed") {
    const without = ["-i", "w"].filter((k) => !kinds.includes(k)).map((k) => (k === "w" ? "w/W" : k));
    return `${name} without ${[...without, "e"].join(", ")}${kinds.length ? `; with ${kinds.join(", ")} allowed` : ""}`;
  }
  return kinds.length ? `${name} with no options but ${kinds.join(" ")}` : `${name} without options`;
}

function findShape(args: readonly string[]): ExecShape {
  const kinds: string[] = [];
  for (const arg of args) {
    if (FIND_RUNS.has(arg)) return { withheld: `find ${arg} runs other programs` };
    // Every `-word` that is not a known read-only primary counts, a primary's value included: stricter, never looser.
    if (arg.startsWith("-") && !FIND_READ_ONLY.has(arg) && !/^-newer[aBcmt][aBcmt]$/.test(arg))
      kinds.push(arg);
  }
  return { program: "find", kinds: unique(kinds) };
}

function sedShape(args: readonly string[]): ExecShape {
  const kinds: string[] = [];
  const scripts: string[] = [];
  const operands: string[] = [];
  let fromOption = false;
  for (let i = 0; i < args.length; i++) {
    const arg = args[i]!;
    if (arg === "--") {
      operands.push(...args.slice(i + 1));
      break;
    }
    if (arg.startsWith("--")) {
      const eq = arg.indexOf("=");
      const name = resolveLong(arg.slice(2, eq === -1 ? undefined : eq), SED_LONG);
      if (name === null) return { withheld: `sed ${arg} is not an option this check can read` };
      if (name === "file") return { withheld: "sed reads its script from a file" };
      if (name === "in-place") kinds.push("-i");
      if (name === "expression") {
        scripts.push(eq === -1 ? (args[++i] ?? "") : arg.slice(eq + 1));
        fromOption = true;
      }
      if (name === "line-length" && eq === -1) i++;
      continue;
    }
    if (arg.startsWith("-") && arg !== "-") {
      for (let j = 1; j < arg.length; j++) {
        const letter = arg[j]!;
        if ("nrEsuzb".includes(letter)) continue;
        if (letter === "i") kinds.push("-i");
        else if (letter === "e") {
          scripts.push(j + 1 < arg.length ? arg.slice(j + 1) : (args[++i] ?? ""));
          fromOption = true;
        } else if (letter === "l") {
          if (j + 1 === arg.length) i++;
        } else if (letter === "f") return { withheld: "sed reads its script from a file" };
        else return { withheld: `sed -${letter} is not an option this check can read` };
        // -i takes its suffix, -e its script, -l its number: the rest of the word is theirs.
        break;
      }
      continue;
    }
    operands.push(arg);
  }
  if (!fromOption && operands.length > 0) scripts.push(operands[0]!);
  for (const script of scripts) {
    const risk = sedScriptRisk(script);
    if (risk === "runs") return { withheld: "the sed script runs shell commands (e)" };
    if (risk === "unreadable") return { withheld: "the sed script could not be read with certainty" };
    if (risk === "writes") kinds.push("w");
  }
  return { program: "sed", kinds: unique(kinds) };
}

function unique(kinds: string[]): string[] {
  return [...new Set(kinds)].sort();
}
