/**
 * The soak's fake LLM, in a process of its own (as bench/fake-llm-server.ts): it answers the user's
 * message "m<id>" with "ok <id>." streamed in pieces, first asking for a `list_dir` tool call when
 * the message says "tool"; a cron job's turn gets "tick."; a memory consolidation gets its
 * save_memory call, as a real model makes it (else the sessions never consolidate, which no real
 * gateway lives with for long). Prints its base URL on the first line of
 * stdout; exits when stdin closes.
 */
import { FakeOpenAI, lastUserText, toolCall, type FakeChatBody } from "../tests/fakes/openai-server.js";

function lastRole(body: FakeChatBody): string | undefined {
  return (body.messages.at(-1) as { role?: string } | undefined)?.role;
}

const fake = await FakeOpenAI.start({
  handler: (req) => {
    // A soak makes hundreds of thousands of requests: the fake keeps none of them.
    fake.requests.splice(0);
    if (req.body.tools?.some((t) => t.function.name === "save_memory")) {
      const entry = { history_entry: "[2026-01-01 00:00] The soak's messages.", memory_update: "# Memory" };
      return { toolCalls: [toolCall("save_memory", entry)] };
    }
    const text = lastUserText(req);
    if (text.includes("[Scheduled task")) return { content: "tick." };
    const id = /\bm(\d+)\b/.exec(text)?.[1] ?? "?";
    if (text.includes("tool") && lastRole(req.body) !== "tool")
      return { toolCalls: [toolCall("list_dir", { path: "." })] };
    return { content: `ok ${id}.`, pieceChars: 3 };
  },
});
process.stdout.write(`${fake.baseURL}\n`);
process.stdin.resume();
process.stdin.on("end", () => void fake.close().then(() => process.exit(0)));
