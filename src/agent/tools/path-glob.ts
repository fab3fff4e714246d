/**
 * A file glob as an anchored regular expression, for find_files: `**` any run of folders, `*`
 * any run of characters but `/`, `?` one such character, `{a,b}` either. Pure.
 */

/** True when the glob names folders: then it is matched against the whole relative path, else the file name. */
export function globHasFolders(glob: string): boolean {
  return glob.includes("/");
}

export function pathGlobToRegExp(glob: string): RegExp {
  let body = "";
  let braces = 0;
  for (let i = 0; i < glob.length; i++) {
    const ch = glob[i]!;
    if (ch === "*" && glob[i + 1] === "*") {
      // `**/` also matches no folder at all (`**/*.md` finds `notes.md`).
      const slash = glob[i + 2] === "/";
      body += slash ? "(?:.*/)?" : ".*";
      i += slash ? 2 : 1;
    } else if (ch === "*") body += "[^/]*";
    else if (ch === "?") body += "[^/]";
    else if (ch === "{") {
      braces++;
      body += "(?:";
    } else if (ch === "}" && braces > 0) {
      braces--;
      body += ")";
    } else if (ch === "," && braces > 0) body += "|";
    else body += ch.replace(/[.+^${}()|[\]\\]/g, "\\$&");
  }
  return new RegExp(`^${body}${")".repeat(braces)}$`);
}
