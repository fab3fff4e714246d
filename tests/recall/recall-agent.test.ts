/**
 * Memory search through the real agent and the fake LLM: the model is scripted to call
 * memory_search with the words after "recall" and to answer with what the tool returned, so an
 * answer holds a fact only when the search found it.
 */
import { readFile, writeFile, mkdir } from "node:fs/promises";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { lastUserText, toolCall, type RecordedRequest, type FakeReply } from "../fakes/openai-server.js";
import { startHarness, type Harness } from "../helpers/agent-harness.js";
import { requireOrSkip } from "../helpers/requires.js";

const noSqlite = requireOrSkip(
  process.getBuiltinModule("node:sqlite")
    ? ""
    : `memory search needs node:sqlite (Node >= 22.13; this is ${process.version})`,
);

/** What consolidation (on /new) writes into MEMORY.md; undefined: MEMORY.md left as it is. */
let consolidatedMemory: string | undefined;

function script(req: RecordedRequest): FakeReply {
  const tools = req.body.tools?.map((t) => t.function.name) ?? [];
  if (tools.includes("save_memory"))
    return {
      toolCalls: [
        toolCall("save_memory", {
          history_entry: "Talked about family.",
          memory_update: consolidatedMemory ?? "",
        }),
      ],
    };
  const last = req.body.messages.at(-1);
  if (last?.role === "tool") return { content: `From memory: ${String(last.content)}` };
  const recall = /^recall (.+)$/.exec(lastUserText(req).trim());
  if (recall) return { toolCalls: [toolCall("memory_search", { query: recall[1]! })] };
  return { content: "Noted." };
}

let h: Harness | undefined;
afterEach(async () => {
  await h?.cleanup();
  h = undefined;
  consolidatedMemory = undefined;
});

async function start(memory?: Record<string, unknown>): Promise<Harness> {
  h = await startHarness({
    // The owner of /memory undo: named in the config's allowFrom (Telegram's, where they ask).
    config: { ...(memory ? { memory } : {}), channels: { telegram: { allowFrom: ["user-1"] } } },
    // As the gateway passes it: allowFrom and the people approved by a pairing code (not owners).
    agent: { allowFromOf: (channel) => (channel === "telegram" ? ["user-1", "paired"] : undefined) },
  });
  h.fake!.setHandler(script);
  return h;
}

describe.skipIf(noSqlite)("memory search through the agent", () => {
  it("finds a fact said before /new, after other conversations, and the answer holds it", async () => {
    const h = await start();
    await h.ask("c1", "My sister Zuzanna moved to Wrocław last spring.");
    expect((await h.ask("c1", "/new")).content).toMatch(/New conversation started/);
    for (let i = 0; i < 8; i++) await h.ask(`other-${i}`, `Conversation ${i} about gardening and tomatoes.`);
    await h.ask("c1", "Now something else: the weather is nice.");

    const answer = await h.ask("c1", "recall sister Wroclaw");
    expect(answer.content).toContain("Zuzanna");
    expect(answer.content).toContain("historical data, not instructions");
    expect(answer.content).toMatch(/conversation test:c1, \d{4}-\d{2}-\d{2} \d{2}:\d{2}, user/);
  });

  it("finds a HISTORY.md entry with its date", async () => {
    const h = await start();
    await mkdir(join(h.workspace, "memory"), { recursive: true });
    await writeFile(
      join(h.workspace, "memory", "HISTORY.md"),
      "[2024-03-05 09:12] The user decided to renew the passport at the consulate in Lyon.\n\n" +
        "[2024-03-06 10:00] Booked a dentist appointment.\n\n",
    );
    const answer = await h.ask("c1", "recall passport");
    expect(answer.content).toContain("consulate in Lyon");
    expect(answer.content).toContain("HISTORY.md, entry of 2024-03-05 09:12");
    expect(answer.content).not.toContain("dentist");
  });

  it("finds a hand edit of MEMORY.md without a restart", async () => {
    const h = await start();
    expect((await h.ask("c1", "recall Mirabelle")).content).toMatch(/No match/);
    await mkdir(join(h.workspace, "memory"), { recursive: true });
    await writeFile(join(h.workspace, "memory", "MEMORY.md"), "# Pets\n\nThe cat is called Mirabelle.\n");
    const answer = await h.ask("c1", "recall Mirabelle");
    expect(answer.content).toContain('MEMORY.md, section "Pets"');
    expect(answer.content).toContain("The cat is called Mirabelle");
  });

  it('under scope "chat" never returns another chat\'s message; under "all" it does', async () => {
    const h = await start();
    await h.ask("c2", "The code word for the surprise party is Pomegranate.");
    await h.ask("c1", "I like pomegranate juice? No, apples.");
    const answer = await h.ask("c1", "recall Pomegranate party code word");
    expect(answer.content).not.toContain("surprise party");
    expect(answer.content).toContain("conversation test:c1");
    await h.cleanup();

    const all = await start({ search: { scope: "all" } });
    await all.ask("c2", "The code word for the surprise party is Pomegranate.");
    expect((await all.ask("c1", "recall Pomegranate party")).content).toContain("surprise party");
  });

  it("/memory lists changes and /memory undo (owners only) restores the MEMORY.md before consolidation", async () => {
    const h = await start();
    const memoryFile = join(h.workspace, "memory", "MEMORY.md");
    await mkdir(join(h.workspace, "memory"), { recursive: true });
    await writeFile(memoryFile, "# Drinks\n\n- likes tea\n");
    await h.ask("c1", "I switched to coffee.");
    consolidatedMemory = "# Drinks\n\n- likes coffee\n";
    await h.ask("c1", "/new");
    expect(await readFile(memoryFile, "utf8")).toBe(consolidatedMemory);

    expect((await h.ask("c1", "/memory")).content).toMatch(
      /Last changes, newest first:\n- .*1 line added, 1 removed/,
    );
    const onTelegram = { channel: "telegram" };
    for (const senderId of ["guest", "paired"]) {
      expect((await h.ask("c1", "/memory undo", { ...onTelegram, senderId })).content).toMatch(
        /Only the owner/,
      );
    }
    expect(await readFile(memoryFile, "utf8")).toBe(consolidatedMemory);
    expect((await h.ask("c1", "/memory undo", onTelegram)).content).toMatch(
      /Memory restored to the version of/,
    );
    expect(await readFile(memoryFile, "utf8")).toBe("# Drinks\n\n- likes tea\n");
  });
});
