/**
 * The real `palaver gateway` as a child process (through tsx) against the
 * loopback fake Telegram and fake LLM: state that survives a poison message,
 * a bad journal line, a second gateway on the same folder or workspace, SIGTERM with
 * messages queued, and a reply for a channel that is no longer enabled.
 */
import { existsSync } from "node:fs";
import { mkdir, readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { Journal } from "../../src/daemon/journal.js";
import { lastUserText, type FakeOpenAI } from "../fakes/openai-server.js";
import type { FakeTelegram } from "../fakes/telegram-server.js";
import { runCli, type RunningCli } from "../helpers/cli.js";
import { GatewayHarness, writeGatewayConfig } from "../helpers/gateway-process.js";
import { waitFor } from "../helpers/wait.js";

/** Temp folder, fakes, config and gateway children (killed after each test): see GatewayHarness. */
const harness = new GatewayHarness({ prefix: "palaver-state-" });
const CHILD_LIMIT_MS = harness.childLimitMs;
/** Generous: one step of a child started through tsx on a busy machine. */
const STEP_MS = 20_000;

let dir: string;
let llm: FakeOpenAI;
let tg: FakeTelegram;
let configPath: string;

beforeEach(async () => {
  await harness.start();
  ({ dir, llm, tg, configPath } = harness);
});

afterEach(() => harness.close());

const startGateway = () => harness.startGateway();
const kill = (run: RunningCli) => harness.kill(run);

async function terminate(run: RunningCli): Promise<void> {
  run.child.kill("SIGTERM");
  expect(await run.exited).toBe(0);
}

const llmAsked = (text: string) => llm.requests.filter((r) => lastUserText(r) === text);
const sentTexts = () => tg.sent.filter((m) => m.method === "sendMessage").map((m) => m.text);
const journalPath = () => join(dir, "journal", "messages.jsonl");

/** What the next start would find in the journal (read from a copy, the live file left alone). */
async function journalPending() {
  const copy = join(dir, "journal-copy.jsonl");
  await writeFile(copy, await readFile(journalPath()));
  const journal = new Journal(copy);
  const pending = journal.open();
  journal.close();
  return pending;
}

describe("palaver gateway keeps its state sane", { timeout: 240_000 }, () => {
  it("a message that kills the daemon every time is tried 3 times, then its chat is told and it is never replayed", async () => {
    // The LLM never answers "poison": each run hangs on it until the test kills the process.
    llm.setHandler((req) =>
      lastUserText(req) === "poison"
        ? { content: "never", delayMs: 120_000 }
        : { content: `re: ${lastUserText(req)}` },
    );
    let run = await startGateway();
    tg.userMessage({ text: "poison" });
    for (let attempt = 1; attempt <= 3; attempt++) {
      await waitFor(() => llmAsked("poison").length === attempt, STEP_MS, `attempt ${attempt}`);
      await kill(run);
      run = await startGateway();
    }
    // The fourth start gives it up: the user is told in plain words, and the LLM is not asked again.
    const notice = await tg.waitForSent((m) => /could not finish answering/.test(m.text ?? ""), STEP_MS);
    expect(notice.text).toMatch(
      /^I could not finish answering your message \("poison"\) after 3 attempts; .*send it again.*\/new/,
    );
    tg.userMessage({ text: "marker" });
    await tg.waitForSent((m) => m.text === "re: marker", STEP_MS);
    expect(run.stderr).toContain("giving it up (it will not be replayed)");
    await terminate(run);

    run = await startGateway();
    tg.userMessage({ text: "marker 2" });
    await tg.waitForSent((m) => m.text === "re: marker 2", STEP_MS);
    expect(llmAsked("poison")).toHaveLength(3);
    expect(sentTexts().filter((t) => /could not finish answering/.test(t ?? ""))).toHaveLength(1);
    await terminate(run);
  });

  it("starts with a journal line of the wrong shape: skipped, kept in .corrupt, the rest replayed", async () => {
    await mkdir(join(dir, "journal"), { recursive: true });
    const out = {
      t: "out",
      id: "out-1",
      at: 1,
      msg: { channel: "telegram", chatId: "42", content: "left over reply" },
    };
    await writeFile(journalPath(), ['{"t":"in","id":"x","at":1}', JSON.stringify(out)].join("\n") + "\n");
    llm.setHandler((req) => ({ content: `re: ${lastUserText(req)}` }));
    const run = await startGateway(); // before: TypeError in dedupeKey, exit 1, on every start
    await tg.waitForSent((m) => m.text === "left over reply", STEP_MS);
    tg.userMessage({ text: "still fine?" });
    await tg.waitForSent((m) => m.text === "re: still fine?", STEP_MS);
    expect(await readFile(`${journalPath()}.corrupt`, "utf8")).toBe('{"t":"in","id":"x","at":1}\n');
    expect(run.stderr).toContain("journal: skipping a bad line");
    await terminate(run);
  });

  it("one gateway per workspace: a second with its own config folder but the same workspace exits 78 naming the first", async () => {
    const first = await startGateway();
    const otherDir = join(dir, "other");
    await mkdir(otherDir);
    const otherConfig = await writeGatewayConfig(
      otherDir,
      { llmBaseURL: llm.baseURL, telegram: tg },
      { agents: { defaults: { workspace: join(dir, "ws") } } },
    );
    const second = await runCli(["gateway", "--config", otherConfig], {
      cwd: otherDir,
      env: { HOME: otherDir },
      timeoutMs: CHILD_LIMIT_MS,
    });
    expect(second.code).toBe(78);
    expect(second.stderr).toContain(
      `another palaver gateway (pid ${first.child.pid}) uses ${join(dir, "ws", "sessions")}; stop it first, ` +
        "or give this one its own workspace (agents.defaults.workspace)",
    );
    // The first one still answers.
    llm.setHandler((req) => ({ content: `re: ${lastUserText(req)}` }));
    tg.userMessage({ text: "still here?" });
    await tg.waitForSent((m) => m.text === "re: still here?", STEP_MS);
  });

  it("one gateway per state folder: a second exits 78 naming the first; CLI edits still work; a killed one's lock is taken over", async () => {
    llm.setHandler((req) => ({ content: `re: ${lastUserText(req)}` }));
    const first = await startGateway();
    const second = await runCli(["gateway", "--config", configPath], {
      cwd: dir,
      env: { HOME: dir },
      timeoutMs: CHILD_LIMIT_MS,
    });
    expect(second.code).toBe(78);
    expect(second.stderr).toContain(`another palaver gateway (pid ${first.child.pid}) uses ${dir}`);

    const cron = await runCli(
      [
        "cron",
        "add",
        "--config",
        configPath,
        "--message",
        "water the plants",
        "--every",
        "3600",
        "--channel",
        "telegram",
        "--to",
        "42",
      ],
      { cwd: dir, env: { HOME: dir }, timeoutMs: CHILD_LIMIT_MS },
    );
    expect(cron.code, cron.stderr).toBe(0);

    // The first one's journal was left alone: a message it takes now survives its crash.
    llm.setHandler((req) => ({ content: `re: ${lastUserText(req)}`, delayMs: 120_000 }));
    tg.userMessage({ text: "after the second try" });
    await waitFor(() => llmAsked("after the second try").length === 1, STEP_MS, "the LLM request");
    await kill(first);
    expect(existsSync(join(dir, "gateway.lock"))).toBe(true); // left behind by SIGKILL

    llm.setHandler((req) => ({ content: `re: ${lastUserText(req)}` }));
    const third = await startGateway();
    await tg.waitForSent((m) => m.text === "re: after the second try", STEP_MS);
    expect(third.stderr).toContain("removed a stale gateway lock");
    await terminate(third);
    expect(existsSync(join(dir, "gateway.lock"))).toBe(false);
  });

  it("SIGTERM with messages queued behind a running turn: the turn finishes, the queued ones are answered at the next start", async () => {
    llm.setHandler((req) => ({
      content: `re: ${lastUserText(req)}`,
      ...(lastUserText(req) === "one" ? { delayMs: 2000 } : {}),
    }));
    const run = await startGateway();
    tg.userMessage({ text: "one" });
    await waitFor(() => llmAsked("one").length === 1, STEP_MS, "the first turn");
    tg.userMessage({ text: "two" });
    tg.userMessage({ text: "three" });
    // Confirmed to Telegram means journaled: the gateway took both and will not get them again.
    await tg.waitFor(() => tg.pendingUpdates === 0, STEP_MS, "the queued updates to be confirmed");
    await terminate(run);
    expect(sentTexts()).toEqual(["re: one"]);
    expect(llmAsked("two")).toEqual([]);

    const next = await startGateway();
    await tg.waitForSent((m) => m.text === "re: three", STEP_MS);
    expect(sentTexts()).toEqual(["re: one", "re: two", "re: three"]);
    await terminate(next);
    expect(await journalPending()).toEqual({ inbound: [], outbound: [] });
  });

  it("a reply in the journal for a channel that is no longer enabled is kept pending, with a warning", async () => {
    await mkdir(join(dir, "journal"), { recursive: true });
    const entry = (id: string, channel: string, content: string) =>
      JSON.stringify({ t: "out", id, at: 1, msg: { channel, chatId: "42", content } });
    await writeFile(
      journalPath(),
      [entry("o1", "discord", "for discord"), entry("o2", "telegram", "for telegram")].join("\n") + "\n",
    );
    const run = await startGateway();
    await tg.waitForSent((m) => m.text === "for telegram", STEP_MS);
    await terminate(run);
    expect(run.stderr).toContain(
      "undelivered reply for channel discord, which is not enabled; kept in the journal until it is",
    );
    const pending = await journalPending();
    expect(pending.outbound.map((p) => p.msg.content)).toEqual(["for discord"]);
  });
});
