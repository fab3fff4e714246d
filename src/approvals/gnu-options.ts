/**
 * A command's options read as GNU getopt_long reads them (pure), against an
 * allow-list: the policy needs to know whether every option a call uses is one
 * that keeps the program read-only. getopt_long accepts any unambiguous prefix
 * of a long option (`--compress-prog` is `--compress-program`), so a check by
 * full name alone can be talked around; this one resolves a prefix as the
 * program does, over ALL of the program's long options: an exact name wins,
 * else a prefix that matches exactly one name. Anything it cannot place (an
 * unknown or ambiguous option, a letter not on the list) is not read-only.
 */

/** What a program's options look like, and which of them keep it read-only. */
export interface OptionTable {
  /** The read-only short options; a letter followed by `:` takes a value (`n:` in head). */
  short: string;
  /**
   * The read-only long options, space-separated; `name=` takes a value (the
   * next word when not given with `=`), `name[=]` an optional one (only with `=`).
   */
  readOnly: string;
  /**
   * The program's other long options, as its `--help` lists them: never
   * allowed, listed so that a prefix resolves as the program resolves it.
   */
  others: string;
}

export type OptionVerdict = { readOnly: true; operands: string[] } | { readOnly: false; why: string };

/** The long option names of a table (markers removed), read-only ones first. */
export function longNames(table: OptionTable): {
  readOnly: Map<string, "none" | "value" | "optional">;
  all: string[];
} {
  const readOnly = new Map<string, "none" | "value" | "optional">();
  for (const spec of words(table.readOnly)) {
    if (spec.endsWith("[=]")) readOnly.set(spec.slice(0, -3), "optional");
    else if (spec.endsWith("=")) readOnly.set(spec.slice(0, -1), "value");
    else readOnly.set(spec, "none");
  }
  return { readOnly, all: [...readOnly.keys(), ...words(table.others)] };
}

/**
 * The long option `--name` stands for, as getopt_long resolves it: the exact
 * name, else the one name it is a prefix of; null when none or several.
 * (getopt_long also accepts several matches that are the same option; those
 * count as ambiguous here, which only asks more often.)
 */
export function resolveLong(name: string, all: readonly string[]): string | null {
  if (all.includes(name)) return name;
  const matches = all.filter((n) => n.startsWith(name));
  return matches.length === 1 ? matches[0]! : null;
}

/**
 * Whether every option among `args` (the words after the program) is on the
 * table's read-only list, and the operands left. Like getopt_long, options
 * may follow operands; `--` ends them; a lone `-` is an operand (stdin).
 */
export function readOptions(args: readonly string[], table: OptionTable): OptionVerdict {
  const { readOnly, all } = longNames(table);
  const operands: string[] = [];
  for (let i = 0; i < args.length; i++) {
    const arg = args[i]!;
    if (arg === "--") {
      operands.push(...args.slice(i + 1));
      break;
    }
    if (arg.startsWith("--")) {
      const eq = arg.indexOf("=");
      const name = arg.slice(2, eq === -1 ? undefined : eq);
      const resolved = resolveLong(name, all);
      if (resolved === null) return { readOnly: false, why: `unknown or ambiguous option --${name}` };
      const takes = readOnly.get(resolved);
      if (takes === undefined) return { readOnly: false, why: `option --${resolved}` };
      if (takes === "none" && eq !== -1) return { readOnly: false, why: `--${resolved} given a value` };
      if (takes === "value" && eq === -1) i++;
      continue;
    }
    if (arg.startsWith("-") && arg !== "-") {
      for (let j = 1; j < arg.length; j++) {
        const letter = arg[j]!;
        const at = letter === ":" ? -1 : table.short.indexOf(letter);
        if (at === -1) return { readOnly: false, why: `option -${letter}` };
        if (table.short[at + 1] === ":") {
          // The rest of the word is the value; else the next word is.
          if (j === arg.length - 1) i++;
          break;
        }
      }
      continue;
    }
    operands.push(arg);
  }
  return { readOnly: true, operands };
}

function words(list: string): string[] {
  return list.split(/\s+/).filter((w) => w !== "");
}
