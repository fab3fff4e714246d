/**
 * A generated workspace history for memory search quality and speed: session files of filler talk
 * that keeps using the same everyday topic words, with facts planted in random sessions, and one
 * question per fact that shares some of its words (the topic word, the name). Used by
 * tests/recall/recall-index.test.ts (small) and bench/memory.ts (the full size).
 */
import { writeFile } from "node:fs/promises";
import { join } from "node:path";

export interface Planted {
  sessionKey: string;
  fact: string;
  question: string;
}

const TOPICS = [
  "dentist",
  "sister",
  "car",
  "garden",
  "flight",
  "doctor",
  "landlord",
  "wedding",
  "passport",
  "bank",
  "school",
  "birthday",
  "recipe",
  "plumber",
  "concert",
  "vacation",
  "insurance",
  "neighbour",
  "bicycle",
  "laptop",
];
const FILLER = [
  "I think we should talk about the {t} again tomorrow",
  "the {t} thing is still on my mind, maybe next week",
  "remind me what we said about the {t}",
  "no news about the {t} yet, I will ask {n}",
  "{n} said the {t} could wait until Friday",
  "ok, thanks for the help with the {t}",
  "can you check the weather for the weekend",
  "let's plan the shopping list for saturday",
];
const SYLLABLES = [
  "ka",
  "lo",
  "mi",
  "ren",
  "to",
  "sha",
  "vel",
  "dor",
  "qui",
  "zan",
  "bex",
  "ul",
  "fro",
  "nim",
  "tep",
];

/** A deterministic pseudo-random sequence, so a failure can be reproduced. */
function random(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s * 1664525 + 1013904223) >>> 0;
    return s / 2 ** 32;
  };
}

function name(rand: () => number): string {
  const n = 2 + Math.floor(rand() * 2);
  let out = "";
  for (let i = 0; i < n; i++) out += SYLLABLES[Math.floor(rand() * SYLLABLES.length)];
  return out[0]!.toUpperCase() + out.slice(1);
}

/** Writes `sessions` session files of `messages` messages each into `dir`; returns the planted facts. */
export async function writeCorpus(
  dir: string,
  opts: { sessions: number; messages: number; facts: number; seed?: number },
): Promise<Planted[]> {
  const rand = random(opts.seed ?? 37);
  const pick = <T>(list: readonly T[]): T => list[Math.floor(rand() * list.length)]!;
  const planted = new Map<number, Planted[]>();
  const facts: Planted[] = [];
  for (let i = 0; i < opts.facts; i++) {
    const session = Math.floor(rand() * opts.sessions);
    const topic = TOPICS[i % TOPICS.length]!;
    const who = `${name(rand)}${i}`;
    const fact = `Important: the ${topic} contact is ${who}, reachable on line ${1000 + i}.`;
    const p = { sessionKey: `chat:${session}`, fact, question: `who is my ${topic} contact ${who}` };
    facts.push(p);
    planted.set(session, [...(planted.get(session) ?? []), p]);
  }
  const day = new Date(2025, 0, 1).getTime();
  for (let s = 0; s < opts.sessions; s++) {
    const key = `chat:${s}`;
    const lines = [
      JSON.stringify({ _type: "metadata", key, created_at: "2025-01-01T00:00:00.000000", metadata: {} }),
    ];
    const mine = planted.get(s) ?? [];
    for (let m = 0; m < opts.messages; m++) {
      const at = new Date(day + s * 3_600_000 + m * 60_000).toISOString().replace("Z", "");
      const plant = mine.length && m === Math.floor(opts.messages / 2) ? mine.shift() : undefined;
      const content = plant
        ? plant.fact
        : pick(FILLER).replace("{t}", pick(TOPICS)).replace("{n}", name(rand));
      lines.push(JSON.stringify({ role: m % 2 === 0 ? "user" : "assistant", content, timestamp: at }));
    }
    // A second fact planted in the same session goes at its end.
    for (const rest of mine)
      lines.push(JSON.stringify({ role: "user", content: rest.fact, timestamp: "2025-01-02T00:00:00" }));
    await writeFile(join(dir, `chat_${s}.jsonl`), lines.join("\n") + "\n");
  }
  return facts;
}
