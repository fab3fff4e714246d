/**
 * The pino root logger. Logs go to stderr (stdout belongs to the terminal
 * chat), pretty on a TTY and JSON otherwise. Secrets are redacted twice:
 * by key name (apiKey, token, ...) and by value (known secrets registered
 * from the config, plus token shapes of the platforms we talk to).
 */
import { createRequire } from "node:module";
import { pino, type DestinationStream, type Logger } from "pino";
import type * as PinoPretty from "pino-pretty";
import { maskUrlCredentials } from "./util/url-credentials.js";

export type { Logger };

const SECRET_KEY = /(api_?key|token|secret|password|authorization|cookie)$/i;
/** Objects whose every value is a secret whatever its name: HTTP headers, child-process environments. */
const SECRET_RECORD_KEY = /^(env|headers|extraHeaders|childEnv)$/i;
const TOKEN_SHAPES = [
  /\bsk-[A-Za-z0-9_-]{16,}/g, // OpenAI-style keys
  /\bxox[abprs]-[A-Za-z0-9-]{10,}/g, // Slack bot/user tokens
  /\bxapp-[A-Za-z0-9-]{10,}/g, // Slack app tokens
  /\b\d{6,12}:[A-Za-z0-9_-]{30,}/g, // Telegram bot tokens
  /(?<=\/bot)\d+:[A-Za-z0-9_-]+/g, // any token in a Bot API URL path (/bot<token>/getMe), whatever its length
  /\b[MNO][A-Za-z\d_-]{23,27}\.[A-Za-z\d_-]{6}\.[A-Za-z\d_-]{27,40}\b/g, // Discord bot tokens
  /\bBearer\s+[A-Za-z0-9._~+/-]{12,}=*/gi,
];
const MASK = "[redacted]";

const knownSecrets = new Set<string>();

/** Registers secret values (from the config) so they never appear in a log line. */
export function registerSecrets(values: Iterable<string>): void {
  for (const v of values) if (v.length >= 6) knownSecrets.add(v);
}

export function redactText(text: string): string {
  let out = text;
  for (const secret of knownSecrets) if (out.includes(secret)) out = out.split(secret).join(MASK);
  for (const shape of TOKEN_SHAPES) out = out.replace(shape, MASK);
  return maskUrlCredentials(out, MASK);
}

/** Deep copy with secret-looking keys masked and secret values scrubbed from strings. */
export function redact(value: unknown, depth = 0): unknown {
  if (typeof value === "string") return redactText(value);
  if (value === null || typeof value !== "object") return value;
  // Deeper than this is not read; dropping it is safer than logging it unredacted.
  if (depth > 8) return "[nested too deep]";
  // Errors under a key other than `err` get the same treatment as `err` (type, message,
  // stack, cause), redacted; left alone, pino would print their enumerable fields raw.
  if (value instanceof Error) return depth === 0 ? value : serializeError(value);
  if (Array.isArray(value)) return value.map((v) => redact(v, depth + 1));
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value)) {
    // `err` at the top is left to the err serializer, which calls serializeError.
    if (depth === 0 && k === "err" && v instanceof Error) out[k] = v;
    else if (SECRET_RECORD_KEY.test(k) && isRecord(v)) out[k] = maskRecord(v);
    else out[k] = SECRET_KEY.test(k) && typeof v === "string" && v !== "" ? MASK : redact(v, depth + 1);
  }
  return out;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value) && !(value instanceof Error);
}

/** Names kept (they help debugging), every value masked. */
function maskRecord(record: Record<string, unknown>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const k of Object.keys(record)) out[k] = MASK;
  return out;
}

/** An error as a plain object (pino's standard shape, nested errors and `cause` included), redacted. */
export function serializeError(err: Error): unknown {
  return redact(pino.stdSerializers.err(err), 1);
}

export interface LogOptions {
  verbose?: boolean;
  /** Defaults to whether stderr is a TTY. */
  pretty?: boolean;
  /** Level without verbose, default "info"; verbose means "debug"; PALAVER_LOG_LEVEL overrides both. */
  level?: string;
  /** Where JSON lines go instead of stderr (tests read what was really logged, redaction included). */
  destination?: DestinationStream;
}

let root: Logger = makeLogger({});

/** Set while a prompt is on the terminal: each pretty log line is written through it (see aroundTerminalLogs). */
let aroundLogLine: ((write: () => void) => void) | undefined;

/**
 * The terminal chat's prompt and a background log line share one screen: while `around` is set,
 * every log line shown on the terminal is written inside it, so the chat can clear its prompt line
 * first and draw it again after (without it the log would be drawn over what the user is typing).
 * Pass undefined to stop.
 */
export function aroundTerminalLogs(around: ((write: () => void) => void) | undefined): void {
  aroundLogLine = around;
}

function writeLogLine(line: string): void {
  const write = () => process.stderr.write(line);
  if (aroundLogLine) aroundLogLine(write);
  else write();
}

function makeLogger(opts: LogOptions): Logger {
  const level = process.env.PALAVER_LOG_LEVEL ?? (opts.verbose ? "debug" : (opts.level ?? "info"));
  const options = {
    level,
    base: undefined,
    formatters: { log: (obj: Record<string, unknown>) => redact(obj) as Record<string, unknown> },
    serializers: { err: (err: unknown) => (err instanceof Error ? serializeError(err) : redact(err)) },
    hooks: {
      logMethod(this: Logger, args: Parameters<Logger["info"]>, method: (...a: unknown[]) => void) {
        method.apply(
          this,
          args.map((a) => (typeof a === "string" ? redactText(a) : a)),
        );
      },
    },
  };
  if (opts.destination) return pino(options, opts.destination);
  const usePretty = opts.pretty ?? process.stderr.isTTY;
  if (usePretty) {
    // NO_COLOR (no-color.org) turns the colours off, as the chat itself does.
    // Loaded only for a terminal: a service logs JSON and never needs it.
    const { prettyFactory } = createRequire(import.meta.url)("pino-pretty") as typeof PinoPretty;
    const format = prettyFactory({ colorize: !process.env.NO_COLOR, ignore: "pid,hostname" });
    return pino(options, { write: (line: string) => writeLogLine(format(line)) });
  }
  return pino(options, pino.destination({ dest: 2, sync: true }));
}

/** Reconfigures the root logger (called once by the CLI). */
export function configureLogging(opts: LogOptions): Logger {
  root = makeLogger(opts);
  return root;
}

export function logger(component?: string): Logger {
  return component ? root.child({ component }) : root;
}
