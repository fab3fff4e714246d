/**
 * HTML conversion worst case (web_fetch): 50 KB pages of hostile shapes
 * (unclosed and deeply nested tags, attribute and "<" floods, comments,
 * scripts, empty-element floods) and a realistic 1 MB article, converted to
 * markdown by src/agent/tools/web/html.ts as web_fetch does (maxChars 50,000). Per shape: the median of 5 warm runs,
 * and the longest the event loop waited for a 1 ms interval timer during
 * a run (median over the runs; conversion yields every 10 ms, so a stall
 * means a step that does not). Target: every shape ≤ 100 ms, stall ≤ 50 ms.
 */
import { pathToFileURL } from "node:url";
import { convertHtml } from "../src/agent/tools/web/html.js";
import { percentile } from "./helpers.js";
import type { BenchResult } from "./types.js";

const SIZE = 50_000;
/** What web_fetch asks for by default (tools.web.fetch.maxChars 50,000 plus its margin). */
const OPTIONS = { mode: "markdown", baseUrl: "https://example.org/a/", maxChars: 51_000 } as const;
const RUNS = 5;
export const TARGET =
  "each 50 KB hostile page → markdown in ≤ 100 ms (median), event loop never held > 50 ms";

const fill = (unit: string, size = SIZE) => unit.repeat(Math.ceil(size / unit.length)).slice(0, size);
const nested = (open: string, close: string) => {
  const n = Math.floor(SIZE / (open.length + close.length));
  return open.repeat(n) + "x" + close.repeat(n);
};

const SHAPES: Record<string, string> = {
  "unclosed <b>": fill("<b>"),
  "unclosed <div>": fill("<div>"),
  "unclosed <li>": fill("<li>"),
  "nested closed <div>": nested("<div>", "</div>"),
  "nested <blockquote>": nested("<blockquote>", "</blockquote>"),
  "nested <ul><li>": nested("<ul><li>", "</li></ul>"),
  "many attributes": `<p ${fill('a="1" ')}>x</p>`,
  "long attribute value": `<a href="${fill("x")}">y</a>`,
  "< flood": fill("<"),
  "comment flood": fill("<!--"),
  "script flood": fill("<script>"),
  "</ inside a script": `<script>${fill("</")}`,
  "<main> flood": fill("<main>"),
  "table cells": `<table><tr>${fill("<td>x")}`,
  "<b>x</b> flood": `<p>${fill("<b>x</b> ")}</p>`,
  "1 MB article": fill(
    "<h2>Section</h2><p>Some <b>bold</b> text with <a href='/wiki/x'>a link</a> and <i>it</i>.</p><ul><li>one</li><li>two</li></ul>",
    1_000_000,
  ),
};

/** Runs `fn` while a 1 ms interval measures the longest gap between its ticks. */
async function withStallMeter<T>(fn: () => Promise<T>): Promise<{ value: T; stallMs: number }> {
  let last = performance.now();
  let stallMs = 0;
  const timer = setInterval(() => {
    const now = performance.now();
    stallMs = Math.max(stallMs, now - last);
    last = now;
  }, 1);
  try {
    const value = await fn();
    stallMs = Math.max(stallMs, performance.now() - last);
    return { value, stallMs };
  } finally {
    clearInterval(timer);
  }
}

export async function benchHtml(): Promise<BenchResult> {
  const rows: string[] = [];
  let pass = true;
  for (const [name, html] of Object.entries(SHAPES)) {
    await convertHtml(html, OPTIONS); // warm-up
    const times: number[] = [];
    const stalls: number[] = [];
    for (let i = 0; i < RUNS; i++) {
      const { stallMs } = await withStallMeter(async () => {
        const started = performance.now();
        await convertHtml(html, OPTIONS);
        times.push(performance.now() - started);
      });
      stalls.push(stallMs);
    }
    const median = percentile(times, 50);
    // The median run's longest stall: one garbage collection or a descheduled
    // process on a shared machine is not the converter holding the loop.
    const stall = percentile(stalls, 50);
    // The 1 MB article is there for information (throughput), not held to the 50 KB target.
    const ok = stall <= 50 && (name === "1 MB article" || median <= 100);
    if (!ok) pass = false;
    const worst = Math.max(...stalls);
    rows.push(
      `${ok ? "" : "FAIL "}${name}: ${median.toFixed(1)} ms, stall ${stall.toFixed(0)} ms (worst run ${worst.toFixed(0)} ms)`,
    );
  }
  return { name: "html", target: TARGET, value: rows.join("; "), pass };
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href) {
  console.log(await benchHtml());
}
