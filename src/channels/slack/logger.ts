/**
 * Bolt's Logger interface (also what its Web API and Socket Mode clients log
 * through), written to palaver's pino logger. Bolt's debug lines carry request
 * URLs, headers and payloads: the Slack secrets this channel holds are scrubbed
 * from every line by value, and token shapes by redactText, before pino sees it.
 */
import { LogLevel, type Logger as SlackLogger } from "@slack/bolt";

export type { SlackLogger };
import { redactText, type Logger } from "../../log.js";

const MASK = "[redacted]";

export function slackLogger(log: Logger, secrets: readonly string[]): SlackLogger {
  const known = secrets.filter((s) => s.length > 0);
  const text = (parts: unknown[]) => {
    let out = parts.map(partText).join(" ");
    for (const secret of known) if (out.includes(secret)) out = out.split(secret).join(MASK);
    return redactText(out);
  };
  return {
    debug: (...msg: unknown[]) => log.debug(text(msg)),
    info: (...msg: unknown[]) => log.info(text(msg)),
    warn: (...msg: unknown[]) => log.warn(text(msg)),
    error: (...msg: unknown[]) => log.error(text(msg)),
    // pino's level rules; the SDKs ask for it to skip building debug strings.
    getLevel: () => {
      const level = log.levelVal;
      if (level <= 20) return LogLevel.DEBUG;
      if (level <= 30) return LogLevel.INFO;
      if (level <= 40) return LogLevel.WARN;
      return LogLevel.ERROR;
    },
    // The level is pino's (the gateway's --verbose); Bolt's own default (INFO) is not taken.
    setLevel: () => {},
    setName: () => {},
  };
}

function partText(part: unknown): string {
  if (typeof part === "string") return part;
  if (part instanceof Error) return part.message;
  try {
    return JSON.stringify(part) ?? String(part);
  } catch {
    return String(part);
  }
}
