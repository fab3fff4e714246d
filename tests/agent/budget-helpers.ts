/** Synthetic chats for the context budget tests and bench: turns with big tool results. */
import type { ChatMessage } from "../../src/llm/types.js";

const WORDS =
  "alpha beta gamma delta the quick brown fox jumps over lazy dog file config value 1234 return".split(" ");

/** `chars` of varied words (deterministic per seed), so token counts are realistic. */
export function text(chars: number, seed = 1): string {
  let out = "";
  let x = seed;
  while (out.length < chars) {
    x = (x * 1103515245 + 12345) % 2147483648;
    out += WORDS[x % WORDS.length]! + (x % 7 === 0 ? "\n" : " ");
  }
  return out.slice(0, chars);
}

/** One user turn: question, a read_file call, its result of `resultChars`, the answer. */
export function toolTurn(i: number, resultChars: number): ChatMessage[] {
  const id = `call_${i}`;
  return [
    { role: "user", content: `question ${i}: what does file ${i} say?` },
    {
      role: "assistant",
      content: null,
      tool_calls: [
        {
          id,
          type: "function",
          function: { name: "read_file", arguments: JSON.stringify({ path: `f${i}.txt` }) },
        },
      ],
    },
    { role: "tool", tool_call_id: id, name: "read_file", content: text(resultChars, i + 1) },
    { role: "assistant", content: `file ${i} says many things.` },
  ];
}

/** Every tool call answered right after its assistant message, and every result answering such a call. */
export function pairingProblems(messages: readonly ChatMessage[]): string[] {
  const problems: string[] = [];
  for (let i = 0; i < messages.length; i++) {
    const m = messages[i]!;
    if (m.role === "tool") {
      let j = i - 1;
      while (j >= 0 && messages[j]!.role === "tool") j--;
      const calls = messages[j]?.tool_calls ?? [];
      if (!calls.some((c) => c.id === m.tool_call_id))
        problems.push(`result ${m.tool_call_id} at ${i} has no call`);
    }
    for (const call of m.tool_calls ?? []) {
      let j = i + 1;
      let found = false;
      while (j < messages.length && messages[j]!.role === "tool")
        found ||= messages[j++]!.tool_call_id === call.id;
      if (!found) problems.push(`call ${call.id} at ${i} has no result`);
    }
  }
  return problems;
}

/** How many leading messages two prompts share byte for byte. */
export function commonPrefix(a: readonly ChatMessage[], b: readonly ChatMessage[]): number {
  let n = 0;
  while (n < a.length && n < b.length && JSON.stringify(a[n]) === JSON.stringify(b[n])) n++;
  return n;
}
