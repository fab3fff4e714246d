/** The Slack SDKs' Logger interface, written to palaver's pino logger. */
import { LogLevel, type Logger as SlackLogger } from "@slack/web-api";
import type { Logger } from "../../log.js";

export function slackLogger(log: Logger): SlackLogger {
  const text = (parts: unknown[]) =>
    parts
      .map((p) => (typeof p === "string" ? p : p instanceof Error ? p.message : JSON.stringify(p)))
      .join(" ");
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
    setLevel: () => {},
    setName: () => {},
  };
}
