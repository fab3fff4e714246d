/**
 * What a sed script can do beyond printing (pure): the `e` command and the
 * `e` flag of `s` run shell commands; `w`/`W` and the `w` flag of `s` write
 * files. The reading mirrors GNU sed's where it matters and is stricter
 * elsewhere: text that cannot be read as sed commands is "unreadable", and an
 * argument (a label, a file name, an a/i/c text) is never taken to run past
 * the point where GNU sed ends it, so a command is never skipped as text.
 */

export type SedScriptRisk = "none" | "writes" | "runs" | "unreadable";

/** Commands that take nothing after them (l, q, Q, L: an optional number). */
const PLAIN = new Set([..."=dDgGhHnNpPxzF{}"]);
const NUMBERED = new Set([..."lqQL"]);
/** Commands whose argument runs to the end of the line (or to a `;` for labels). */
const TO_END_OF_LINE = new Set([..."aicrR#"]);
const LABELS = new Set([...":btTv"]);

export function sedScriptRisk(script: string): SedScriptRisk {
  let writes = false;
  let i = 0;
  const at = (k: number) => script[k] ?? "";
  const skipWhile = (re: RegExp) => {
    while (i < script.length && re.test(at(i))) i++;
  };
  const toEndOfLine = () => {
    while (i < script.length && at(i) !== "\n") i++;
  };
  /** Past a delimited part (`/re/`), backslash escapes as sed reads them; false when it never ends. */
  const delimited = (delim: string): boolean => {
    for (; i < script.length; i++) {
      if (at(i) === "\\") i++;
      else if (at(i) === delim) {
        i++;
        return true;
      }
    }
    return false;
  };
  const address = (): boolean => {
    const c = at(i);
    if (/\d/.test(c)) {
      skipWhile(/\d/);
      if (at(i) === "~") {
        i++;
        skipWhile(/\d/);
      }
    } else if (c === "$") i++;
    else if (c === "/" || c === "\\") {
      const delim = c === "/" ? "/" : at(i + 1);
      i += c === "/" ? 1 : 2;
      if (delim === "" || delim === "\n" || delim === "\\" || !delimited(delim)) return false;
      skipWhile(/[IM]/);
    }
    return true;
  };

  while (i < script.length) {
    skipWhile(/[\s;]/);
    if (i >= script.length) break;
    if (!address()) return "unreadable";
    if (at(i) === ",") {
      i++;
      if (at(i) === "+" || at(i) === "~") {
        i++;
        skipWhile(/\d/);
      } else if (!address()) return "unreadable";
    }
    skipWhile(/[ \t]/);
    if (at(i) === "!") i++;
    skipWhile(/[ \t]/);
    const cmd = at(i++);
    if (PLAIN.has(cmd)) continue;
    if (NUMBERED.has(cmd)) {
      skipWhile(/[ \t]/);
      skipWhile(/\d/);
    } else if (LABELS.has(cmd)) {
      while (i < script.length && at(i) !== "\n" && at(i) !== ";") i++;
    } else if (TO_END_OF_LINE.has(cmd)) toEndOfLine();
    else if (cmd === "w" || cmd === "W") {
      writes = true;
      toEndOfLine();
    } else if (cmd === "e") return "runs";
    else if (cmd === "s" || cmd === "y") {
      const delim = at(i++);
      if (delim === "" || delim === "\n" || delim === "\\") return "unreadable";
      if (!delimited(delim) || !delimited(delim)) return "unreadable";
      if (cmd === "y") continue;
      for (; i < script.length && /[gpiImMe0-9w]/.test(at(i)); i++) {
        if (at(i) === "e") return "runs";
        if (at(i) === "w") {
          writes = true;
          toEndOfLine();
        }
      }
    } else return "unreadable";
  }
  return writes ? "writes" : "none";
}
