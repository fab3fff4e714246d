/**
 * Credentials written into URLs (`http://user:pass@proxy:3128`,
 * `https://TOKEN@host`). Proxy URLs legitimately carry them, so they are not
 * refused there; they are masked wherever a URL is shown or logged. Shared by
 * the log redactor and the config masker so both hide the same parts.
 */

// userinfo with a password: the password runs to the last "@" before the path,
// so an unencoded "p@ss" is hidden whole.
const WITH_PASSWORD = /\b([a-z][a-z0-9+.-]*:\/\/)([^\s/?#:@]*):([^\s/?#]*)@/gi;
// userinfo without one: GitHub and others take a token as the user name.
const USER_ONLY = /\b([a-z][a-z0-9+.-]*:\/\/)([^\s/?#:@]+)@/gi;

/** `text` with every URL password (and every password-less user name) replaced by `mask`. */
export function maskUrlCredentials(text: string, mask: string): string {
  if (!text.includes("@")) return text;
  return text
    .replace(WITH_PASSWORD, (_m, scheme: string, user: string) => `${scheme}${user}:${mask}@`)
    .replace(USER_ONLY, (_m, scheme: string) => `${scheme}${mask}@`);
}

/** The secret parts of URL credentials in `text` (passwords, and user names that stand alone). */
export function urlCredentialSecrets(text: string): string[] {
  if (!text.includes("@")) return [];
  const found: string[] = [];
  for (const m of text.matchAll(WITH_PASSWORD)) if (m[3]) found.push(m[3]);
  for (const m of text.replace(WITH_PASSWORD, "").matchAll(USER_ONLY)) if (m[2]) found.push(m[2]);
  return found;
}

/** Whether `url` carries a user name or password. */
export function hasUrlCredentials(url: string): boolean {
  try {
    const parsed = new URL(url);
    if (parsed.username !== "" || parsed.password !== "") return true;
  } catch {
    // Not a URL the WHATWG parser takes; the pattern below still catches "scheme://x@host".
  }
  return urlCredentialSecrets(url).length > 0;
}
