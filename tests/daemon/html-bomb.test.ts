/**
 * End to end (issue 11): the real `palaver gateway` child process fetches a
 * 50 KB page of nested unclosed tags with web_fetch. Before the fix its
 * conversion held the event loop for minutes (20 s already at 4,000 tags):
 * /healthz stopped answering and every other chat stalled. Here /healthz is
 * probed and another chat talks to the bot while the bomb turn runs.
 */
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { lastUserText, toolCall, type FakeOpenAI, type RecordedRequest } from "../fakes/openai-server.js";
import type { FakeTelegram } from "../fakes/telegram-server.js";
import type { RunningCli } from "../helpers/cli.js";
import { GatewayHarness, healthUrlFromLog, writeGatewayConfig } from "../helpers/gateway-process.js";
import { waitFor } from "../helpers/wait.js";

/** Temp folder, fakes and the gateway child (killed after each test): see GatewayHarness. */
const harness = new GatewayHarness({ prefix: "palaver-html-bomb-" });
const CHILD_LIMIT_MS = harness.childLimitMs;
/** 50 KB of `<b>` that never close, as in the issue. */
const BOMB = `<html><head><title>Bomb</title></head><body><p>bomb page</p>${"<b>".repeat(16_600)}</body></html>`;

let dir: string;
let llm: FakeOpenAI;
let tg: FakeTelegram;
let page: Server;
let pageUrl: string;
let pageRequested = false;
let gateway: RunningCli;

beforeEach(async () => {
  await harness.start();
  ({ dir, llm, tg } = harness);
  pageRequested = false;
  page = createServer((_req, res) => {
    pageRequested = true;
    res.writeHead(200, { "content-type": "text/html; charset=utf-8" });
    res.end(BOMB);
  });
  await new Promise<void>((resolve) => page.listen(0, "127.0.0.1", resolve));
  pageUrl = `http://127.0.0.1:${(page.address() as AddressInfo).port}/bomb`;
  // Closed once the gateway is gone, before the fakes.
  const server = page;
  harness.onClose(async () => {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });
});

afterEach(() => harness.close());

/** The bomb chat asks for web_fetch, then answers with what the tool returned; other chats get "pong". */
function script(req: RecordedRequest) {
  const last = req.body.messages[req.body.messages.length - 1]!;
  if (last.role === "tool") {
    const result = String(last.content);
    return {
      content: result.includes("Title: Bomb") && result.includes("bomb page") ? "fetched" : "bad fetch",
    };
  }
  if (lastUserText(req) === "fetch it") return { toolCalls: [toolCall("web_fetch", { url: pageUrl })] };
  return { content: "pong" };
}

/** Milliseconds /healthz takes to answer; a blocked gateway fails the probe after 10 s. */
async function probe(url: string): Promise<number> {
  const started = performance.now();
  const res = await fetch(url, { signal: AbortSignal.timeout(10_000) });
  await res.text();
  expect(res.status).toBe(200);
  return performance.now() - started;
}

describe("an HTML bomb fetched by web_fetch", { timeout: CHILD_LIMIT_MS }, () => {
  it("does not stall the gateway: /healthz answers and another chat gets its reply meanwhile", async () => {
    llm.setHandler(script);
    const configPath = await writeGatewayConfig(
      dir,
      { llmBaseURL: llm.baseURL, telegram: tg },
      { tools: { web: { fetch: { allowPrivateNetwork: true } } } },
    );
    gateway = harness.spawnGateway({ configPath });
    const run = gateway;
    await waitFor(() => healthUrlFromLog(run.stderr) !== undefined, 20_000, "the health endpoint");
    const healthz = new URL("/healthz", healthUrlFromLog(run.stderr)).href;
    await probe(healthz); // warm: the first request opens the connection

    tg.userMessage({ text: "fetch it", from: { id: 7 } });
    await waitFor(() => pageRequested, 20_000, "the gateway to fetch the page");

    // While the bomb turn converts the page and finishes, another chat talks to the bot
    // and /healthz is probed without pause.
    const otherSent = performance.now();
    tg.userMessage({ text: "ping", from: { id: 8 } });
    const latencies: number[] = [];
    let otherReplyMs: number | undefined;
    const bombDone = () => tg.sent.some((m) => m.chatId === 7 && m.text !== undefined);
    while (!bombDone() || otherReplyMs === undefined) {
      latencies.push(await probe(healthz));
      if (otherReplyMs === undefined && tg.sent.some((m) => m.chatId === 8 && m.text === "pong")) {
        otherReplyMs = performance.now() - otherSent;
      }
      if (performance.now() - otherSent > 30_000) break;
    }

    expect(tg.sent.find((m) => m.chatId === 7)?.text).toBe("fetched");
    // The issue asks for < 100 ms and a reply within 1 s. The bounds here are 10x and 3x
    // that because this runs on loaded CI machines next to other test files; the bug
    // (the event loop held for minutes) fails them by orders of magnitude either way.
    expect(Math.max(...latencies)).toBeLessThan(1_000);
    expect(otherReplyMs).toBeDefined();
    expect(otherReplyMs!).toBeLessThan(3_000);
  });
});
