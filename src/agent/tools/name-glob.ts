/** A tool name glob (`*` any run of characters, `?` one) as an anchored regular expression. Pure. */
export function globToNameRegExp(glob: string): RegExp {
  const body = [...glob.trim()]
    .map((ch) => (ch === "*" ? ".*" : ch === "?" ? "." : ch.replace(/[.+^${}()|[\]\\]/g, "\\$&")))
    .join("");
  return new RegExp(`^${body}$`);
}
