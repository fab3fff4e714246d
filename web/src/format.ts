/** Small pure formatting for the page's text. */

export function formatBytes(bytes: number): string {
  if (bytes < 1024) return `${bytes} B`;
  if (bytes < 1024 * 1024) return `${(bytes / 1024).toFixed(bytes < 10 * 1024 ? 1 : 0)} KB`;
  return `${(bytes / 1024 / 1024).toFixed(1)} MB`;
}

/** "just now", "5 min ago", "3 h ago", else the date: the conversation list's times. */
export function formatAge(iso: string, now: number = Date.now()): string {
  const at = Date.parse(iso);
  if (Number.isNaN(at)) return "";
  const minutes = Math.floor((now - at) / 60_000);
  if (minutes < 1) return "just now";
  if (minutes < 60) return `${minutes} min ago`;
  if (minutes < 24 * 60) return `${Math.floor(minutes / 60)} h ago`;
  return new Date(at).toLocaleDateString();
}

/** The token in a URL fragment like `#token=abc` (or `#c=x&token=abc`), if any. */
export function tokenFromHash(hash: string): string | undefined {
  return new URLSearchParams(hash.replace(/^#/, "")).get("token") ?? undefined;
}

/** The conversation named by the fragment `#c=<id>`, if it is a valid id. */
export function conversationFromHash(hash: string): string | undefined {
  const id = new URLSearchParams(hash.replace(/^#/, "")).get("c");
  return id && /^[a-z0-9]{1,32}$/.test(id) ? id : undefined;
}
