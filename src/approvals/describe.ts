/**
 * What a tool call will do, in words for the approval prompt in the chat
 * (pure). The person deciding reads this on a phone: the command, the file or
 * the URL up front, the rest cut to a bounded length.
 */

/** The longest description, in characters; longer ones end in "…". */
export const MAX_DESCRIPTION_CHARS = 400;
/** The longest JSON shown for a tool without a description of its own. */
const MAX_JSON_CHARS = 200;

/** One line for the approval prompt: what `tool` will do with `args`. */
export function describeCall(tool: string, args: Record<string, unknown>): string {
  return cut(describe(tool, args), MAX_DESCRIPTION_CHARS);
}

function describe(tool: string, args: Record<string, unknown>): string {
  switch (tool) {
    case "exec": {
      const dir = text(args.working_dir);
      return `Run the shell command: ${codeSpan(text(args.command))}${dir ? ` (in ${dir})` : ""}`;
    }
    case "write_file":
      return `Write ${text(args.content).length} characters to ${text(args.path)}`;
    case "edit_file":
      return `Edit ${text(args.path)}`;
    case "web_fetch":
      return `Fetch ${text(args.url)}`;
    case "spawn":
      return `Start a background task: ${text(args.label) || text(args.task)}`;
    default:
      return `Call ${tool} with ${cut(json(args), MAX_JSON_CHARS)}`;
  }
}

/**
 * `s` as a markdown code span that a backtick inside cannot end early
 * (CommonMark: a fence longer than any run of backticks inside, padded when
 * `s` starts or ends with one).
 */
function codeSpan(s: string): string {
  const longest = Math.max(0, ...(s.match(/`+/g) ?? []).map((run) => run.length));
  const fence = "`".repeat(longest + 1);
  const pad = s.startsWith("`") || s.endsWith("`") ? " " : "";
  return `${fence}${pad}${s}${pad}${fence}`;
}

/** A string argument as it is; anything else as JSON (a model may send a number for a path). */
function text(value: unknown): string {
  if (value === undefined || value === null) return "";
  return typeof value === "string" ? value : json(value);
}

function json(value: unknown): string {
  return JSON.stringify(value) ?? String(value);
}

/** At most `max` characters, the cut marked with "…" (never inside a surrogate pair). */
function cut(s: string, max: number): string {
  if (s.length <= max) return s;
  let end = max - 1;
  if (/[\uD800-\uDBFF]/.test(s[end - 1] ?? "")) end--;
  return `${s.slice(0, end)}…`;
}
