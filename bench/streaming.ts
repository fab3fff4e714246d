/**
 * Streaming: a gateway in process (streaming on, the real Telegram adapter and grammy) polling the
 * fake Telegram, 20 private chats writing at once, and a streaming fake LLM in its own process whose
 * first token arrives 300 ms after the request, then 50 tokens/s (4 characters each) for 90 tokens.
 * Private chats show the reply as a draft (sendMessageDraft) while it is written, then one
 * sendMessage with the final. One warm-up round (connections, JIT), then one measured round:
 *
 * (a) time from the user's message (the update queued) to the first text the chat shows (its first
 *     draft or message), p50 over the 20 chats. Target: ≤ first token + 200 ms.
 * (b) Bot API calls per answer (sendMessageDraft, sendMessage, editMessageText, sendChatAction),
 *     per chat against 2 + answer duration / streamIntervalMs, where the answer duration runs from
 *     the user's message to the final's sendMessage. Target: every chat within it.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { ConfigSchema } from "../src/config/schema.js";
import { Gateway } from "../src/gateway.js";
import { configureLogging } from "../src/log.js";
import { FakeTelegram } from "../tests/fakes/telegram-server.js";
import { percentile, startFakeLlmProcess } from "./helpers.js";
import type { BenchResult } from "./types.js";

const CHATS = 20;
const FIRST_TOKEN_MS = 300;
const TOKENS_PER_S = 50;
const TOKEN_CHARS = 4;
const TOKENS = 90;
const PIECE_MS = 1000 / TOKENS_PER_S;
/** Telegram's default preview pace (channels.telegram.streamIntervalMs unset). */
const STREAM_INTERVAL_MS = 1000;
const FIRST_TEXT_BUDGET_MS = 200;
/** Each answer takes about 2.3 s; one not sent by then is lost. */
const ROUND_TIMEOUT_MS = 10_000;
/** Plain words: the final's HTML is the text itself. */
const ANSWER = Array.from({ length: TOKENS }, (_, i) => `w${String(i % 100).padStart(2, "0")}`).join(" ");
const COUNTED = new Set(["sendMessageDraft", "sendMessage", "editMessageText", "sendChatAction"]);

export const TARGET =
  `${CHATS} private Telegram chats at once, first token at ${FIRST_TOKEN_MS} ms then ${TOKENS_PER_S} tokens/s: ` +
  `first visible text p50 ≤ ${FIRST_TOKEN_MS + FIRST_TEXT_BUDGET_MS} ms; ` +
  `Bot API calls per answer ≤ 2 + answer duration / ${STREAM_INTERVAL_MS} ms`;

interface ChatResult {
  /** The final never arrived as a message. */
  lost: boolean;
  firstTextMs: number;
  /** The counted calls by method. */
  byMethod: Map<string, number>;
  durationMs: number;
  calls: number;
  allowed: number;
}

function userId(round: number, i: number): number {
  // New chats each round: nothing of the warm-up round is counted in the measured one.
  return 5000 + round * 100 + i;
}

/** Every chat writes once, at the same moment; resolves when each has its final. */
async function round(tg: FakeTelegram, r: number): Promise<ChatResult[]> {
  const sentAt = Date.now();
  for (let i = 0; i < CHATS; i++) tg.userMessage({ text: `question ${r}`, from: { id: userId(r, i) } });
  const finalOf = (chatId: number) =>
    tg.sent.find((m) => m.chatId === chatId && m.method === "sendMessage" && m.text === ANSWER);
  const answered = () =>
    Array.from({ length: CHATS }, (_, i) => finalOf(userId(r, i))).filter(Boolean).length;
  // A final that never comes is a result (a lost answer), not a crash of the benchmark.
  await tg.waitFor(() => answered() === CHATS, ROUND_TIMEOUT_MS, `${CHATS} answers`).catch(() => undefined);
  return Array.from({ length: CHATS }, (_, i) => {
    const chatId = userId(r, i);
    const final = finalOf(chatId);
    const texts = [
      ...tg.drafts.filter((d) => d.chatId === chatId).map((d) => d.at),
      ...tg.sent.filter((m) => m.chatId === chatId && m.text !== undefined).map((m) => m.at),
    ];
    const calls = tg.calls.filter((c) => COUNTED.has(c.method) && Number(c.params.chat_id) === chatId);
    const durationMs = (final?.at ?? Number.NaN) - sentAt;
    const byMethod = new Map<string, number>();
    for (const c of calls) byMethod.set(c.method, (byMethod.get(c.method) ?? 0) + 1);
    return {
      lost: !final,
      firstTextMs: Math.min(...texts) - sentAt,
      byMethod,
      durationMs,
      calls: calls.length,
      allowed: 2 + durationMs / STREAM_INTERVAL_MS,
    };
  });
}

export async function benchStreaming(): Promise<BenchResult> {
  const dir = await mkdtemp(join(tmpdir(), "palaver-bench-streaming-"));
  const llm = await startFakeLlmProcess(FIRST_TOKEN_MS - PIECE_MS, {
    content: ANSWER,
    pieceChars: TOKEN_CHARS,
    pieceDelayMs: PIECE_MS,
  });
  const tg = await FakeTelegram.start();
  // The gateway's info logs would land in the middle of the benchmark's output.
  configureLogging({ level: "error" });
  const workspace = join(dir, "ws");
  const config = ConfigSchema.parse({
    agents: { defaults: { workspace, provider: "custom", model: "fake-model", maxConcurrentTurns: CHATS } },
    providers: { custom: { apiKey: "k", apiBase: llm.baseURL } },
    channels: {
      streaming: true,
      sendProgress: false,
      telegram: { enabled: true, token: tg.token, apiRoot: tg.apiRoot, allowFrom: ["*"] },
    },
    gateway: { port: 0, heartbeat: { enabled: false } },
    cron: { enabled: false },
  });
  const gateway = new Gateway({ loaded: { config, workspace, path: join(dir, "config.json") } });
  try {
    await gateway.start();
    // Polling under way: updates queued before the first long poll could be skipped as stale.
    await tg.waitForCall(
      "getUpdates",
      (c) => typeof c.params.timeout === "number" && c.params.timeout > 0,
      15_000,
    );
    const warmUp = await round(tg, 0);
    const measured = await round(tg, 1);
    const lost = [...warmUp, ...measured].filter((c) => c.lost).length;
    const chats = measured.filter((c) => !c.lost);
    const firstTexts = measured.map((c) => c.firstTextMs);
    const firstText = percentile(firstTexts, 50);
    const over = chats.filter((c) => c.calls > c.allowed);
    const mean = (values: number[]) => values.reduce((a, b) => a + b, 0) / values.length;
    const perMethod = [...COUNTED]
      .map((m) => `${m} ${mean(chats.map((c) => c.byMethod.get(m) ?? 0)).toFixed(1)}`)
      .join(", ");
    const firstTextOk = firstText <= FIRST_TOKEN_MS + FIRST_TEXT_BUDGET_MS;
    return {
      name: "streaming",
      target: TARGET,
      value:
        `first visible text p50 ${firstText.toFixed(0)} ms ` +
        `(p90 ${percentile(firstTexts, 90).toFixed(0)} ms, first token at ${FIRST_TOKEN_MS} ms); ` +
        `calls per answer: mean ${mean(chats.map((c) => c.calls)).toFixed(1)} (${perMethod}), ` +
        `max ${Math.max(...chats.map((c) => c.calls))} ` +
        `for answers of ${mean(chats.map((c) => c.durationMs)).toFixed(0)} ms on average ` +
        `(allowed ${mean(chats.map((c) => c.allowed)).toFixed(1)}); ${over.length} of ${chats.length} chats over` +
        (lost ? `; ${lost} of ${2 * CHATS} finals never sent as a message (lost answers)` : ""),
      pass: firstTextOk && over.length === 0 && lost === 0,
    };
  } finally {
    await gateway.stop(5000);
    configureLogging({});
    await tg.close();
    await llm.close();
    await rm(dir, { recursive: true, force: true });
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href) {
  console.log(await benchStreaming());
}
