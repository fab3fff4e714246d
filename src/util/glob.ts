/** Name globs (tool names in approval rules and agent files): `*` any run of characters, `?` one. */

/** A glob as an anchored regular expression. */
export function globToRegExp(glob: string): RegExp {
  const body = [...glob]
    .map((ch) => (ch === "*" ? ".*" : ch === "?" ? "." : ch.replace(/[.+^${}()|[\]\\]/g, "\\$&")))
    .join("");
  return new RegExp(`^${body}$`);
}
