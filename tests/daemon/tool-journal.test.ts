/** The tool-call journal on its own: what a restart recalls, what it forgets, bad lines, failed writes. */
import { mkdirSync } from "node:fs";
import { mkdtemp, readFile, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { InboundMessage } from "../../src/bus/types.js";
import { systemMessage } from "../../src/bus/types.js";
import { ToolJournal } from "../../src/daemon/tool-journal.js";
import { captureLog } from "../helpers/log.js";

let dir: string;
let path: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), "palaver-tool-journal-"));
  path = join(dir, "journal", "tools.jsonl");
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

const turnMsg = (turn: string): InboundMessage => ({
  channel: "telegram",
  senderId: "1",
  chatId: "10",
  content: "hi",
  messageId: "7",
  journalId: turn,
});
const send = { name: "message", args: '{"content":"Tea at five."}', n: 1 };
const exec = { name: "exec", args: '{"command":"make deploy"}', n: 1 };

/** A restart: a new journal over the same file (the old one was never closed, as after SIGKILL). */
function reopen(pending: string[], log = captureLog().log): ToolJournal {
  const journal = new ToolJournal(path, { log });
  journal.open(pending);
  return journal;
}

async function lines(): Promise<Record<string, unknown>[]> {
  const text = await readFile(path, "utf8");
  return text
    .split("\n")
    .filter(Boolean)
    .map((l) => JSON.parse(l) as Record<string, unknown>);
}

describe("ToolJournal", () => {
  it("after a restart, recalls the finished calls of a pending turn with the turn state they changed", () => {
    const first = reopen([]);
    const record = first.forTurn(turnMsg("turn-1"))!;
    record.started(send);
    record.done(send, "Message sent to telegram:10", { sentToOriginChat: true });
    record.started(exec);
    // the process dies while exec runs

    const second = reopen(["turn-1"]).forTurn(turnMsg("turn-1"))!;
    expect(second.recall(send)).toEqual({
      state: "done",
      result: "Message sent to telegram:10",
      turn: { sentToOriginChat: true },
    });
    expect(second.recall(exec)).toEqual({ state: "started" });
    // Another occurrence, other arguments or another turn are other calls.
    expect(second.recall({ ...send, n: 2 })).toBeUndefined();
    expect(second.recall({ ...send, args: '{"content":"other"}' })).toBeUndefined();
    expect(reopen(["turn-1"]).forTurn(turnMsg("turn-2"))!.recall(send)).toBeUndefined();
  });

  it("keeps only the turns the message journal will replay, and forgets a turn once it has ended", async () => {
    const first = reopen([]);
    for (const turn of ["done-before-crash", "pending", "ended"]) {
      const record = first.forTurn(turnMsg(turn))!;
      record.started(send);
      record.done(send, `sent for ${turn}`, {});
    }
    first.endTurn("ended");

    // "done-before-crash" finished in the message journal, but the crash came before endTurn.
    const second = reopen(["pending"]);
    expect(second.size).toBe(1);
    expect(await lines()).toEqual([{ t: "done", turn: "pending", ...send, result: "sent for pending" }]);
    second.endTurn("pending");
    expect(second.size).toBe(0);
    expect(reopen([]).size).toBe(0);
    expect(await readFile(path, "utf8")).toBe("");
  });

  it("stays small: compacts to the open turns after compactEvery appends", async () => {
    const journal = new ToolJournal(path, { log: captureLog().log, compactEvery: 10 });
    journal.open([]);
    const open = journal.forTurn(turnMsg("still-running"))!;
    open.started(exec);
    for (let i = 0; i < 50; i++) {
      const turn = `t${i}`;
      const record = journal.forTurn(turnMsg(turn))!;
      record.started(send);
      record.done(send, "ok", {});
      journal.endTurn(turn);
    }
    expect((await lines()).length).toBeLessThanOrEqual(10 + 1);
    expect(reopen(["still-running"]).forTurn(turnMsg("still-running"))!.recall(exec)).toEqual({
      state: "started",
    });
  });

  it("only records the messages a restart replays: journaled ones, not system messages", () => {
    const journal = reopen([]);
    expect(
      journal.forTurn({ channel: "cli", senderId: "u", chatId: "direct", content: "x" }),
    ).toBeUndefined();
    // A cron job fires with its origin chat's metadata, which may hold that chat's old journal id.
    const fired = systemMessage({
      senderId: "cron",
      content: "reminder",
      origin: { channel: "telegram", chatId: "10", metadata: { journalId: "turn-1" } },
    });
    expect(journal.forTurn(fired)).toBeUndefined();
    expect(journal.forTurn(turnMsg("turn-1"))).toBeDefined();
  });

  it("skips lines that are not valid entries, keeps them in tools.jsonl.corrupt, and uses the rest", async () => {
    mkdirSync(join(dir, "journal"), { recursive: true });
    const good = {
      t: "done",
      turn: "turn-1",
      ...send,
      result: "Message sent",
      turnState: { sentToOriginChat: true },
    };
    const bad = [
      '{"t":"done","turn":"turn-1","name":"exec"}', // valid JSON, wrong shape
      '{"t":"start","turn":"turn-1","name":"exec","args":"{}","n":"one"}',
      "[1,2,3]",
      "null",
      '{"t":"done","turn":"turn-1","na', // torn by a crash mid-append
    ];
    await writeFile(path, [bad[0], JSON.stringify(good), ...bad.slice(1)].join("\n"));
    const { log, lines: logged } = captureLog();

    const record = reopen(["turn-1"], log).forTurn(turnMsg("turn-1"))!;
    expect(record.recall(send)).toEqual({
      state: "done",
      result: "Message sent",
      turn: { sentToOriginChat: true },
    });
    expect(logged.filter((l) => l.msg?.includes("skipping a bad line"))).toHaveLength(bad.length);
    expect((await readFile(`${path}.corrupt`, "utf8")).split("\n").filter(Boolean)).toEqual(bad);
    // The rewritten file holds only the valid entry.
    expect(await lines()).toEqual([good]);
  });

  it("creates its file 0600", async () => {
    reopen([]).forTurn(turnMsg("turn-1"))!.started(send);
    expect((await stat(path)).mode & 0o777).toBe(0o600);
  });

  it("a write that fails is logged once per episode, never throws into the turn, and recovers", async () => {
    const { log, lines: logged } = captureLog();
    const journal = new ToolJournal(path, { log });
    journal.open([]);
    const record = journal.forTurn(turnMsg("turn-1"))!;
    record.started(send);
    // The file goes away and its path turns into a folder: every open for appending fails (EISDIR).
    journal.close();
    await rm(path);
    mkdirSync(path);
    expect(() => {
      record.done(send, "sent", {});
      record.started(exec);
      record.done(exec, "deployed", {});
    }).not.toThrow();
    const warnings = logged.filter((l) => l.level === 40);
    expect(warnings).toHaveLength(1);
    expect(warnings[0]!.msg).toContain("a crash may repeat tool calls");
    // What could not be written is still known to this process.
    expect(record.recall(send)).toMatchObject({ state: "done" });

    await rm(path, { recursive: true });
    record.started({ ...exec, n: 2 });
    expect(logged.filter((l) => l.msg?.includes("recording tool calls works again"))).toHaveLength(1);
    expect(await lines()).toEqual([{ t: "start", turn: "turn-1", ...exec, n: 2 }]);
  });

  it("an unreadable file does not stop the start: logged, and the journal works", () => {
    const { log, lines: logged } = captureLog();
    mkdirSync(path, { recursive: true }); // reading a folder fails (EISDIR)
    const journal = new ToolJournal(path, { log });
    expect(() => journal.open(["turn-1"])).not.toThrow();
    expect(logged.filter((l) => l.level === 40)).toHaveLength(1);
    expect(journal.forTurn(turnMsg("turn-1"))!.recall(send)).toBeUndefined();
  });
});
