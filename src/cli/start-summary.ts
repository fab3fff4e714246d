/**
 * What `palaver gateway` prints for a person at a terminal once it runs: what runs (channels, the
 * model, the sandbox) and the web chat's link on a line of its own, so it can be clicked or copied.
 * The structured log stays for --verbose and for a service (stdout not a terminal). Pure.
 */

export interface StartFacts {
  pid: number;
  /** "openai at https://api.openai.com/v1 with model gpt-4o-mini (...)", or the reason there is none. */
  llm: string;
  channels: { name: string; state: string; lastError?: string }[];
  sandbox?: string;
  /** The link that opens the web chat signed in, when it runs. */
  webChat?: string;
  /** The web chat's token is channels.web.token: the link does not carry it. */
  configuredToken?: boolean;
}

export function formatStartSummary(f: StartFacts): string {
  const channels =
    f.channels.length === 0
      ? "none (enable one in the config, or talk with `palaver chat`)"
      : f.channels
          .map((c) => (c.state === "running" ? c.name : `${c.name} (${c.lastError ?? c.state})`))
          .join(", ");
  const rows: [string, string][] = [
    ["model", f.llm],
    ["channels", channels],
    ...(f.sandbox ? ([["commands", f.sandbox]] as [string, string][]) : []),
  ];
  const lines = [
    `palaver is running (pid ${f.pid}). Ctrl+C stops it; warnings and errors show below, --verbose shows the whole log.`,
    ...rows.map(([k, v]) => `  ${k.padEnd(9)} ${v}`),
  ];
  if (f.webChat) {
    const how = f.configuredToken
      ? "Web chat (sign in with the token in channels.web.token):"
      : "Web chat (this link signs you in; `palaver web` shows it again with a QR code):";
    lines.push("", how, f.webChat);
  }
  return `${lines.join("\n")}\n`;
}
