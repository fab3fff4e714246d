/**
 * Context budget (src/agent/budget/): fitting must be cheap enough to run
 * before every model call, and over a long chat with big tool results it must
 * keep every prompt inside the budget while leaving most of each prompt a
 * prefix of the previous one (what a provider's prompt cache reuses).
 *
 * 1. Fit a 1,000-message history (250 turns, each with a 10 KB tool result)
 *    into a 128k window's budget, warm (counts cached as in a running chat):
 *    target p50 ≤ 1 ms.
 * 2. A 1,000-turn synthetic chat (a read_file call with a 10 KB result and an
 *    answer per turn: two model calls), consolidated by tokens as the
 *    consolidator does (history past half the window), every call fitted:
 *    target no prompt over the budget, stable-prefix share ≥ 80 % of prompt tokens.
 */
import { pathToFileURL } from "node:url";
import { fitMessages } from "../src/agent/budget/fit.js";
import { TokenCounter } from "../src/agent/budget/tokens.js";
import { budgetSettings } from "../src/agent/budget/windows.js";
import { tokenConsolidationRange } from "../src/agent/consolidation.js";
import { defaultConfig } from "../src/config/schema.js";
import type { ChatMessage } from "../src/llm/types.js";
import { text, toolTurn } from "../tests/agent/budget-helpers.js";
import { percentile } from "./helpers.js";
import type { BenchResult } from "./types.js";

export const TARGET =
  "fit 1,000 messages with 10 KB tool results ≤ 1 ms (p50); 1,000-turn chat: never over budget, stable prefix ≥ 80 %";
const RESULT_CHARS = 10_000;
const FIT_TARGET_MS = 1;
const SHARE_TARGET = 0.8;

const SYSTEM: ChatMessage = { role: "system", content: `# palaver\n\n${text(8000, 99)}` };

export async function benchContextBudget(): Promise<BenchResult> {
  const settings = budgetSettings(defaultConfig().agents.defaults, ["gpt-4o"]);
  const counter = new TokenCounter(settings.model);
  await counter.load();
  const count = (m: ChatMessage) => counter.message(m);
  const budget = settings.budgetTokens;

  // 1. The cost of one fit.
  const history: ChatMessage[] = [SYSTEM];
  for (let i = 0; history.length < 1000; i++) history.push(...toolTurn(i, RESULT_CHARS));
  const keepFrom = history.length - 1;
  for (let i = 0; i < 20; i++) fitMessages({ messages: history, budget, count, keepFrom });
  const times: number[] = [];
  for (let i = 0; i < 200; i++) {
    const started = performance.now();
    fitMessages({ messages: history, budget, count, keepFrom });
    times.push(performance.now() - started);
  }
  const fitMs = percentile(times, 50);

  // 2. A long chat, consolidated as it goes; and the same chat with consolidation failing (for information).
  const chat = longChat(count, budget, settings.consolidationTokens);
  const behind = longChat(count, budget, 0);
  const share = chat.share;
  const maxTokens = Math.max(chat.maxTokens, behind.maxTokens);
  const consolidations = chat.consolidations;
  const pass = fitMs <= FIT_TARGET_MS && maxTokens <= budget && share >= SHARE_TARGET;
  return {
    name: "context budget",
    target: TARGET,
    value:
      `fit p50 ${fitMs.toFixed(3)} ms (target ${FIT_TARGET_MS} ms, ratio ${(fitMs / FIT_TARGET_MS).toFixed(2)}); ` +
      `largest prompt ${maxTokens} of ${budget} tokens (ratio ${(maxTokens / budget).toFixed(2)}); ` +
      `stable prefix ${(share * 100).toFixed(1)} % (target ${SHARE_TARGET * 100} %, ratio ${(share / SHARE_TARGET).toFixed(2)}); ` +
      `${consolidations} consolidations; without consolidation: stable prefix ${(behind.share * 100).toFixed(1)} %, ` +
      `largest prompt ${behind.maxTokens}`,
    pass,
  };
}

/** 1,000 turns of two calls each; `threshold` 0: never consolidated. */
function longChat(
  count: (m: ChatMessage) => number,
  budget: number,
  threshold: number,
): { share: number; maxTokens: number; consolidations: number } {
  const stored: ChatMessage[] = [];
  let lastConsolidated = 0;
  let previous: ChatMessage[] = [];
  let stableTokens = 0;
  let promptTokens = 0;
  let maxTokens = 0;
  let consolidations = 0;
  const call = (prompt: ChatMessage[], turnStart: number) => {
    const fitted = fitMessages({ messages: prompt, budget, count, keepFrom: turnStart });
    maxTokens = Math.max(maxTokens, fitted.tokens);
    let shared = 0;
    while (
      shared < previous.length &&
      shared < fitted.messages.length &&
      sameMessage(previous[shared]!, fitted.messages[shared]!)
    ) {
      stableTokens += count(fitted.messages[shared]!);
      shared++;
    }
    promptTokens += fitted.tokens;
    previous = fitted.messages;
  };
  for (let turn = 0; turn < 1000; turn++) {
    const [user, assistant, tool, answer] = toolTurn(turn, RESULT_CHARS) as [
      ChatMessage,
      ChatMessage,
      ChatMessage,
      ChatMessage,
    ];
    const runtime: ChatMessage = { role: "user", content: `[Runtime context]\nCurrent time: turn ${turn}` };
    const prompt = [SYSTEM, ...stored.slice(lastConsolidated), runtime, user];
    const turnStart = prompt.length - 2;
    call(prompt, turnStart);
    call([...prompt, assistant, tool], turnStart);
    stored.push(user, assistant, tool, answer);
    const range = tokenConsolidationRange(stored, lastConsolidated, {
      count,
      threshold: threshold,
    });
    if (threshold > 0 && range) {
      lastConsolidated = range.end;
      consolidations++;
    }
  }
  return { share: stableTokens / promptTokens, maxTokens, consolidations };
}

/** Byte-identical on the wire: the same object, or equal JSON. */
function sameMessage(a: ChatMessage, b: ChatMessage): boolean {
  return a === b || JSON.stringify(a) === JSON.stringify(b);
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href) {
  console.log(await benchContextBudget());
}
