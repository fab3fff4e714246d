/** A pino logger whose records (parsed JSON) land in an array, to assert on what was logged. */
import { pino } from "pino";

export type LogRecord = Record<string, unknown> & { msg?: string; level?: number };

export function captureLog(level = "debug"): { log: pino.Logger; lines: LogRecord[] } {
  const lines: LogRecord[] = [];
  const log = pino({ level }, { write: (line: string) => void lines.push(JSON.parse(line) as LogRecord) });
  return { log, lines };
}
