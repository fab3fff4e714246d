/**
 * The web chat: what it costs to have it.
 *
 * (a) Page weight: dist/web's index.html + app.js + style.css as the build's gzip -9 copies (what
 *     the gateway sends a browser without brotli; the brotli copies' size is shown too). Target
 *     ≤ 60 KB.
 * (b) Latency through the page: the real gateway (dist/main.js, streaming on) and Debian's
 *     Chromium; the fake LLM, in this process, sends its first token FIRST_TOKEN_MS after the
 *     request, then a piece every PIECE_MS. Measured per message: the first text visible in the
 *     page (a MutationObserver's Date.now()) minus the moment the LLM sent its first token (the
 *     same clock). One warm-up message, then the median of ROUNDS. Target ≤ +150 ms.
 * (c) Idle memory: the gateway's VmRSS after IDLE_MS idle with only the web channel (having served
 *     the page once) against the same gateway with no channel at all, RSS_RUNS of each, alternated;
 *     the medians compared. Target ≤ +5 MB.
 */
import { mkdtemp, readdir, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { existsSync } from "node:fs";
import { chromium } from "playwright-core";
import { FakeOpenAI } from "../tests/fakes/openai-server.js";
import { writeGatewayConfig } from "../tests/helpers/gateway-process.js";
import { ensureWebBuilt, WEB_DIST } from "../tests/web/build.js";
import { ensureBuilt } from "../tests/helpers/dist.js";
import { residentBytes, spawnGateway, type Entry, type GatewayChild } from "./gateway-child.js";
import { percentile } from "./helpers.js";
import type { BenchResult } from "./types.js";

const WEIGHT_TARGET_KB = 60;
const LATENCY_BUDGET_MS = 150;
const RSS_BUDGET_MB = 5;
const FIRST_TOKEN_MS = 300;
const PIECE_MS = 20;
const ROUNDS = 5;
const IDLE_MS = 25_000;
const IDLE_TAIL_SAMPLES = 5;
/** Gateways started per configuration for (c). */
const RSS_RUNS = 3;
const READY_TIMEOUT_MS = 20_000;
const CHROMIUM = process.env.PALAVER_CHROMIUM ?? "/usr/bin/chromium";
/** Fixed, so the page's address is known without reading the child's stdout. */
const TOKEN = "bench-web-token-0123456789abcdef";

export const TARGET =
  `page (HTML+JS+CSS, gzip) ≤ ${WEIGHT_TARGET_KB} KB; first visible token through the page ≤ first LLM token + ` +
  `${LATENCY_BUDGET_MS} ms; idle gateway RSS with the web channel ≤ without + ${RSS_BUDGET_MB} MB`;

const kb = (bytes: number) => bytes / 1024;
const mb = (bytes: number) => bytes / 2 ** 20;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** What a browser downloads: the build's gzip and brotli copies of index.html and the assets. */
async function pageWeight(): Promise<{ gzip: number; brotli: number; files: string[] }> {
  ensureWebBuilt();
  const assets = (await readdir(join(WEB_DIST, "assets")))
    .filter((f) => !/\.(br|gz)$/.test(f))
    .map((f) => join("assets", f));
  const files = ["index.html", ...assets];
  let gzip = 0;
  let brotli = 0;
  for (const file of files) {
    gzip += (await stat(join(WEB_DIST, `${file}.gz`))).size;
    brotli += (await stat(join(WEB_DIST, `${file}.br`))).size;
  }
  return { gzip, brotli, files };
}

interface Gateway {
  child: GatewayChild;
  url: string;
  dir: string;
  close(): Promise<void>;
}

async function startGateway(entry: Entry, llmBaseURL: string, web: boolean): Promise<Gateway> {
  const dir = await mkdtemp(join(tmpdir(), "palaver-bench-web-"));
  const configPath = await writeGatewayConfig(
    dir,
    { llmBaseURL },
    {
      channels: { web: { enabled: web, token: TOKEN }, streaming: true },
      cron: { enabled: false },
    },
  );
  const child = spawnGateway(entry, configPath, dir);
  const close = async () => {
    await child.stop();
    await rm(dir, { recursive: true, force: true });
  };
  try {
    return { child, url: await child.healthUrl(READY_TIMEOUT_MS), dir, close };
  } catch (err) {
    await close();
    throw err;
  }
}

/** (b): the page's first visible text minus the LLM's first token, per message; the warm-up left out. */
async function latency(entry: Entry): Promise<number[] | string> {
  if (!existsSync(CHROMIUM)) return `not measured: no Chromium at ${CHROMIUM}`;
  const llm = await FakeOpenAI.start();
  const firstTokens: number[] = [];
  llm.setHandler(() => {
    firstTokens.push(Date.now() + FIRST_TOKEN_MS + PIECE_MS);
    return {
      content: "A streamed answer, ".repeat(10),
      delayMs: FIRST_TOKEN_MS,
      pieceDelayMs: PIECE_MS,
      pieceChars: 4,
    };
  });
  const gateway = await startGateway(entry, llm.baseURL, true);
  const browser = await chromium.launch({ executablePath: CHROMIUM });
  try {
    const page = await browser.newPage();
    await page.goto(`${gateway.url}/#token=${TOKEN}`);
    await page.locator("#app").waitFor({ state: "visible", timeout: READY_TIMEOUT_MS });
    // The moment the first text of a streaming answer shows, as the page's clock says it.
    await page.evaluate(`{
      window.firstText = [];
      let counted = null;
      new MutationObserver(() => {
        const el = document.querySelector("#transcript article.assistant.streaming .body");
        if (el && el !== counted && el.textContent.trim() !== "") {
          counted = el;
          window.firstText.push(Date.now());
        }
      }).observe(document.getElementById("transcript"), { subtree: true, childList: true, characterData: true });
    }`);
    const overheads: number[] = [];
    for (let i = 0; i <= ROUNDS; i++) {
      await page.locator("#input").fill(`question ${i}`);
      await page.locator("#input").press("Enter");
      // Polled from here: the page's CSP forbids the eval that waitForFunction would use.
      const deadline = Date.now() + READY_TIMEOUT_MS;
      while ((await page.evaluate<number>("window.firstText.length")) <= i) {
        if (Date.now() > deadline) throw new Error(`no answer to message ${i} within ${READY_TIMEOUT_MS} ms`);
        await sleep(10);
      }
      await page.locator("#stop").waitFor({ state: "hidden", timeout: READY_TIMEOUT_MS });
      const shown = await page.evaluate<number>(`window.firstText[${i}]`);
      if (i > 0) overheads.push(shown - firstTokens[i]!);
    }
    return overheads;
  } finally {
    await browser.close();
    await gateway.close();
    await llm.close();
  }
}

/** (c): the median of the last idle samples, in bytes. */
async function idleRss(entry: Entry, llmBaseURL: string, web: boolean): Promise<number | undefined> {
  const gateway = await startGateway(entry, llmBaseURL, web);
  try {
    if (web) {
      // Served once, as a browser would ask for it: the server keeps the compressed files.
      const html = await (
        await fetch(`${gateway.url}/`, { headers: { "accept-encoding": "br, gzip" } })
      ).text();
      for (const [, path] of html.matchAll(/(?:src|href)="(\/assets\/[^"]+)"/g)) {
        await (
          await fetch(`${gateway.url}${path}`, { headers: { "accept-encoding": "br, gzip" } })
        ).arrayBuffer();
      }
    }
    const samples: number[] = [];
    for (let waited = 0; waited < IDLE_MS; waited += 1000) {
      await sleep(1000);
      const rss = residentBytes(gateway.child.child.pid!);
      if (rss === undefined) return undefined;
      samples.push(rss);
    }
    return percentile(samples.slice(-IDLE_TAIL_SAMPLES), 50);
  } finally {
    await gateway.close();
  }
}

export async function benchWeb(): Promise<BenchResult> {
  const buildProblem = ensureBuilt();
  const entry: Entry = buildProblem ? "tsx" : "dist";
  const weight = await pageWeight();
  const overheads = await latency(entry);
  const llm = await FakeOpenAI.start();
  // Alternated and repeated: one idle process against another differs by a few MB by chance alone.
  const withoutRuns: number[] = [];
  const withRuns: number[] = [];
  try {
    for (let i = 0; i < RSS_RUNS; i++) {
      const a = await idleRss(entry, llm.baseURL, false);
      const b = await idleRss(entry, llm.baseURL, true);
      if (a !== undefined) withoutRuns.push(a);
      if (b !== undefined) withRuns.push(b);
    }
  } finally {
    await llm.close();
  }
  const without = withoutRuns.length ? percentile(withoutRuns, 50) : undefined;
  const withWeb = withRuns.length ? percentile(withRuns, 50) : undefined;
  const list = (runs: number[]) => runs.map((v) => mb(v).toFixed(1)).join(", ");

  const parts: string[] = [];
  let pass = kb(weight.gzip) <= WEIGHT_TARGET_KB;
  parts.push(
    `page ${kb(weight.gzip).toFixed(1)} KB gzip (brotli ${kb(weight.brotli).toFixed(1)} KB; ` +
      `${(weight.gzip / 1024 / WEIGHT_TARGET_KB).toFixed(2)}× the target)`,
  );
  if (typeof overheads === "string") parts.push(`latency ${overheads}`);
  else {
    const median = percentile(overheads, 50);
    pass &&= median <= LATENCY_BUDGET_MS;
    parts.push(
      `first visible token ${median.toFixed(0)} ms after the LLM's first token, median of ${overheads.length} ` +
        `(${overheads.map((v) => v.toFixed(0)).join(", ")}; ${(median / LATENCY_BUDGET_MS).toFixed(2)}× the budget)`,
    );
  }
  if (without === undefined || withWeb === undefined) parts.push("idle RSS not measurable here (no /proc)");
  else {
    const extra = mb(withWeb - without);
    pass &&= extra <= RSS_BUDGET_MB;
    parts.push(
      `idle RSS ${mb(withWeb).toFixed(1)} MB with the web channel (${list(withRuns)}), ` +
        `${mb(without).toFixed(1)} MB without (${list(withoutRuns)}), medians: ` +
        `${extra >= 0 ? "+" : ""}${extra.toFixed(1)} MB (${(extra / RSS_BUDGET_MB).toFixed(2)}× the budget)`,
    );
  }
  if (buildProblem) parts.push(`dist not used: ${buildProblem}`);
  return { name: "web chat", target: TARGET, value: parts.join("; "), pass };
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href) {
  console.log(await benchWeb());
}
