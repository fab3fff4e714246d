/**
 * README's Troubleshooting section quotes messages so people can search for what they
 * see; a quote that drifted from the source sends them nowhere (issue 13). Each bullet
 * whose bold headline is a quoted message is checked against the text of src/.
 */
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";

const ROOT = join(import.meta.dirname, "../..");

/** Every .ts file under src/, with string concatenations joined and `${...}` parts removed. */
function sourceText(): string {
  const files = readdirSync(join(ROOT, "src"), { recursive: true, encoding: "utf8" }).filter((f) =>
    f.endsWith(".ts"),
  );
  return files
    .map((f) => readFileSync(join(ROOT, "src", f), "utf8"))
    .join("\n")
    .replace(/["'`]\s*\+\s*["'`]/g, "") // "a " + "b" → "a b"
    .replace(/\$\{[^}]*\}/g, ""); // the values a message is filled with
}

/** The quoted messages that head a Troubleshooting bullet: - **`...`** or - **"..."**. */
function quotedMessages(): string[] {
  const readme = readFileSync(join(ROOT, "README.md"), "utf8");
  const section = readme.slice(readme.indexOf("## Troubleshooting"), readme.indexOf("## Development"));
  return [...section.matchAll(/^- \*\*(?:`([^`]+)`|"([^"]+)")\*\*/gm)].map((m) => m[1] ?? m[2]!);
}

/**
 * What the README writes for the values filled in (N, NAME, PATH, FOLDER, CHANNEL, ID, an
 * env var name, "(...)", "..."), and the log name a shared reader is given by its caller
 * ("journal: ..."): the literal text between them must be in the source.
 */
const PLACEHOLDER = /\b(?:N|NAME|PATH|FOLDER|CHANNEL|ID)\b|PALAVER_[A-Z_]+|\(\.\.\.\)|\.\.\.|^journal(?=:)/;
const MIN_FRAGMENT = 6;

describe("README troubleshooting", () => {
  const source = sourceText();
  const messages = quotedMessages();

  it("quotes messages", () => {
    expect(messages.length).toBeGreaterThan(5);
  });

  it.each(messages)("quotes a message palaver prints: %s", (message) => {
    const fragments = message
      .split(new RegExp(PLACEHOLDER, "g"))
      .map((f) => f.trim())
      .filter((f) => f.length >= MIN_FRAGMENT);
    expect(fragments.length).toBeGreaterThan(0);
    const missing = fragments.filter((f) => !source.includes(f));
    expect(missing).toEqual([]);
  });
});
