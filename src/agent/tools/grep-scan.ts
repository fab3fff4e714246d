/**
 * The scan behind grep, in a worker thread: a regular expression from the model can backtrack
 * for hours on one line, and JavaScript cannot interrupt a running match, so the scan runs where
 * it can be terminated when its time is up. Lines are cut to SCAN_LINE_CHARS before matching,
 * which bounds most slow patterns too. The worker is plain code (eval), so it needs no file of
 * its own in the bundle.
 */
import { Worker } from "node:worker_threads";

export interface ScanRequest {
  pattern: string;
  flags: string;
  files: { abs: string; shown: string }[];
  context: number;
  maxMatches: number;
  maxFileBytes: number;
}

export interface ScanResult {
  /** grep-style lines: `path:12: text` for a match, `path-11- text` for context, `--` between groups. */
  lines: string[];
  matches: number;
  /** Why the scan ended early, if it did. */
  stopped?: "matches" | "time";
  skipped: { binary: number; large: number };
}

/** Characters of a line matched and shown: minified files and data dumps are one huge line. */
const SCAN_LINE_CHARS = 500;

const WORKER_CODE = `
const { parentPort, workerData } = require("node:worker_threads");
const { readFileSync, statSync } = require("node:fs");
const { pattern, flags, files, context, maxMatches, maxFileBytes, lineChars } = workerData;
const re = new RegExp(pattern, flags);
let matches = 0;
for (const file of files) {
  let size;
  try { size = statSync(file.abs).size; } catch { continue; }
  if (size > maxFileBytes) { parentPort.postMessage({ skipped: "large" }); continue; }
  let buf;
  try { buf = readFileSync(file.abs); } catch { continue; }
  if (buf.subarray(0, 8000).includes(0)) { parentPort.postMessage({ skipped: "binary" }); continue; }
  const lines = buf.toString("utf8").split(/\\r?\\n/);
  const out = [];
  let last = -1;
  for (let i = 0; i < lines.length && matches < maxMatches; i++) {
    const line = lines[i].slice(0, lineChars);
    re.lastIndex = 0;
    if (!re.test(line)) continue;
    matches++;
    const from = Math.max(i - context, last + 1);
    if (last >= 0 && from > last + 1) out.push("--");
    for (let j = from; j < i; j++) out.push(file.shown + "-" + (j + 1) + "- " + lines[j].slice(0, lineChars));
    out.push(file.shown + ":" + (i + 1) + ": " + line);
    const to = Math.min(lines.length - 1, i + context);
    for (let j = i + 1; j <= to; j++) {
      const next = lines[j].slice(0, lineChars);
      re.lastIndex = 0;
      if (re.test(next)) break;
      out.push(file.shown + "-" + (j + 1) + "- " + next);
      last = j;
    }
    last = Math.max(last, i);
  }
  if (out.length) parentPort.postMessage({ lines: out, matches });
  if (matches >= maxMatches) { parentPort.postMessage({ done: "matches" }); break; }
}
parentPort.postMessage({ done: true });
`;

/** Runs the scan, ending it after `timeoutMs` (or on abort) with what it found so far. */
export function scanFiles(req: ScanRequest, timeoutMs: number, signal: AbortSignal): Promise<ScanResult> {
  const result: ScanResult = { lines: [], matches: 0, skipped: { binary: 0, large: 0 } };
  const worker = new Worker(WORKER_CODE, {
    eval: true,
    workerData: { ...req, lineChars: SCAN_LINE_CHARS },
    resourceLimits: { maxOldGenerationSizeMb: 256 },
  });
  return new Promise<ScanResult>((resolve, reject) => {
    const finish = (err?: unknown) => {
      clearTimeout(timer);
      signal.removeEventListener("abort", onAbort);
      void worker.terminate();
      if (err) reject(err instanceof Error ? err : new Error("grep stopped", { cause: err }));
      else resolve(result);
    };
    const timer = setTimeout(() => {
      result.stopped = "time";
      finish();
    }, timeoutMs);
    const onAbort = () => finish(signal.reason);
    signal.addEventListener("abort", onAbort, { once: true });
    worker.on(
      "message",
      (msg: { lines?: string[]; matches?: number; skipped?: "binary" | "large"; done?: unknown }) => {
        if (msg.lines) {
          if (result.lines.length) result.lines.push("--");
          result.lines.push(...msg.lines);
          result.matches = msg.matches ?? result.matches;
        }
        if (msg.skipped) result.skipped[msg.skipped]++;
        if (msg.done === "matches") result.stopped = "matches";
        if (msg.done === true) finish();
      },
    );
    worker.on("error", (err) => finish(err));
    worker.on("exit", () => finish());
  });
}
