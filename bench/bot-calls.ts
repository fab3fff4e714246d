/**
 * Bot API calls per reply with a queue: the real gateway (dist/main.js) polling the fake
 * Telegram at maxConcurrentTurns 1, 100 chats writing at once (so 99 wait in the queue while
 * one turn runs), a fake LLM answering after 100 ms in its own process. Counts every Bot API
 * call but getUpdates (sendChatAction, sendMessage ...) from the moment the messages are queued
 * until the 100th reply, per reply. A reply needs one sendMessage and its turn one "typing…";
 * a typing loop for every waiting chat would multiply that. Target: ≤ 2 calls per reply.
 * Also checks that every chat got exactly one reply per round.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { FakeTelegram } from "../tests/fakes/telegram-server.js";
import { isLongPoll, writeGatewayConfig } from "../tests/helpers/gateway-process.js";
import { ensureBuilt } from "../tests/helpers/dist.js";
import { spawnGateway, type Entry } from "./gateway-child.js";
import { startFakeLlmProcess } from "./helpers.js";
import { median } from "./measure.js";
import type { BenchResult, Measure } from "./types.js";

const CHATS = 100;
const LATENCY_MS = 100;
const ROUNDS = 3;
const TARGET_CALLS = 2;
const ROUND_TIMEOUT_MS = 120_000;
export const TARGET = `${CHATS} chats queued at maxConcurrentTurns 1: ≤ ${TARGET_CALLS} Bot API calls per reply (getUpdates not counted)`;

const REPLY = "hi"; // what bench/fake-llm-server.ts answers

export async function benchBotCalls(): Promise<BenchResult> {
  const buildProblem = ensureBuilt();
  const entry: Entry = buildProblem ? "tsx" : "dist";
  const dir = await mkdtemp(join(tmpdir(), "palaver-bench-botcalls-"));
  const llm = await startFakeLlmProcess(LATENCY_MS);
  const tg = await FakeTelegram.start();
  const configPath = await writeGatewayConfig(
    dir,
    { llmBaseURL: llm.baseURL, telegram: tg },
    { agents: { defaults: { maxConcurrentTurns: 1 } }, cron: { enabled: false } },
  );
  const gateway = spawnGateway(entry, configPath, dir);
  try {
    await gateway.healthUrl(15_000);
    await tg.waitForCall("getUpdates", isLongPoll, 15_000);
    const perReply: number[] = [];
    const problems: string[] = [];
    for (let r = 0; r < ROUNDS; r++) {
      const callsBefore = tg.calls.length;
      const sentBefore = tg.sent.length;
      for (let i = 0; i < CHATS; i++) {
        tg.userMessage({ text: `round ${r}`, from: { id: 1001 + i, first_name: `user${i}` } });
      }
      const replies = () => tg.sent.slice(sentBefore).filter((s) => s.text === REPLY);
      await tg.waitFor(() => replies().length >= CHATS, ROUND_TIMEOUT_MS, `${CHATS} replies`);
      const calls = tg.calls.slice(callsBefore).filter((c) => c.method !== "getUpdates").length;
      perReply.push(calls / CHATS);
      const chats = new Set(replies().map((s) => s.chatId));
      if (chats.size !== CHATS || replies().length !== CHATS)
        problems.push(`round ${r}: ${replies().length} replies to ${chats.size} chats`);
    }
    const measure: Measure = {
      name: "calls per reply",
      unit: "calls",
      rounds: perReply,
      target: TARGET_CALLS,
    };
    const byMethod = new Map<string, number>();
    for (const c of tg.calls) byMethod.set(c.method, (byMethod.get(c.method) ?? 0) + 1);
    return {
      name: "bot-calls",
      target: TARGET,
      value:
        `${median(perReply).toFixed(2)} Bot API calls per reply; all calls: ` +
        [...byMethod].map(([m, n]) => `${m} ${n}`).join(", ") +
        (problems.length ? `; ${problems.join("; ")}` : "; every chat answered exactly once per round") +
        (entry === "tsx" ? `; from src via tsx (${buildProblem})` : ""),
      pass: median(perReply) <= TARGET_CALLS && problems.length === 0,
      measures: [measure],
    };
  } finally {
    const code = await gateway.stop(15_000);
    if (code !== 0) console.error(`gateway exited with ${code}:\n${gateway.stderr.slice(-2000)}`);
    await tg.close();
    await llm.close();
    await rm(dir, { recursive: true, force: true });
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href) {
  const { formatMeasure } = await import("./measure.js");
  const result = await benchBotCalls();
  console.log(result.value);
  for (const m of result.measures ?? []) console.log(formatMeasure(m));
}
