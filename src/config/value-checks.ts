/**
 * Values of the right type that can never work, refused when the config is
 * loaded so every command (gateway, chat, config check) says the same thing
 * before anything runs, rather than each message failing after its retries.
 */

/**
 * A key copied from an example rather than the user's own: "sk-...", "<your key>", "your-api-key".
 * The README and the onboard hints write keys this way, and a real key never holds "..." or "<".
 */
export function isPlaceholderKey(key: string): boolean {
  const k = key.trim();
  return /\.\.\.|…|^<.*>$|^(?:sk-)?x{3,}$|^(?:your|my)[-_ ]?(?:api[-_ ]?)?key(?:[-_ ]?here)?$/i.test(k);
}

/** What is wrong with an apiBase, or undefined when it is an http(s) URL (or blank, which means unset). */
export function apiBaseProblem(base: string): string | undefined {
  const text = base.trim();
  if (text === "") return undefined;
  let url: URL | undefined;
  try {
    url = new URL(text);
  } catch {
    url = undefined;
  }
  if (url && (url.protocol === "http:" || url.protocol === "https:") && url.host !== "") return undefined;
  // "localhost:11434/v1" parses as a URL of scheme "localhost:": what is missing is http://.
  const bare = !/^[a-z][a-z0-9+.-]*:\/\//i.test(text);
  return bare
    ? `"${text}" has no scheme: write "http://${text}" (or https://)`
    : `"${text}" is not an http(s) URL (expected http(s)://host/path)`;
}
