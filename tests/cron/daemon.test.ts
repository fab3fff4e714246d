/**
 * The real `palaver gateway` child process (issue 11): a user schedules a job
 * through the model's cron tool, is then taken out of allowFrom with a SIGHUP
 * reload, and the job is disabled instead of firing into their chat (issue 11); reminders missed
 * while the gateway was stopped run once at the next start, up to cron.maxCatchUp (issue 41).
 */
import { readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { lastUserText, toolCall, type FakeOpenAI, type FakeReply } from "../fakes/openai-server.js";
import type { FakeTelegram } from "../fakes/telegram-server.js";
import { runCli, type RunningCli } from "../helpers/cli.js";
import { GatewayHarness, gatewayConfig } from "../helpers/gateway-process.js";
import { waitFor } from "../helpers/wait.js";

/** Temp folder, fakes and the gateway child (killed after each test): see GatewayHarness. */
const harness = new GatewayHarness({ prefix: "palaver-cron-daemon-" });

let dir: string;
let llm: FakeOpenAI;
let tg: FakeTelegram;
let configPath: string;
let gateway: RunningCli;

async function writeConfig(allowFrom: string[]): Promise<void> {
  const config = gatewayConfig(
    dir,
    { llmBaseURL: llm.baseURL, telegram: tg },
    { channels: { telegram: { allowFrom } } },
  );
  await writeFile(configPath, `${JSON.stringify(config, null, 2)}\n`);
}

interface StoredJob {
  id: string;
  enabled: boolean;
  payload: { creator?: unknown };
  state: { lastStatus: string | null; lastError: string | null };
}
async function jobs(): Promise<StoredJob[]> {
  try {
    return (JSON.parse(await readFile(join(dir, "cron", "jobs.json"), "utf8")) as { jobs: StoredJob[] }).jobs;
  } catch {
    return [];
  }
}

beforeEach(async () => {
  await harness.start();
  ({ dir, llm, tg, configPath } = harness);
  await writeConfig(["42"]);
  llm.setHandler((req): FakeReply => {
    const last = req.body.messages.at(-1) as { role: string };
    if (last.role === "tool") return { content: "scheduled" };
    if (lastUserText(req).includes("[Scheduled task")) return { content: "time for water" };
    return { toolCalls: [toolCall("cron", { action: "add", message: "water", every_seconds: 3600 })] };
  });
});

afterEach(() => harness.close());

describe("cron jobs of a sender taken out of allowFrom", { timeout: 90_000 }, () => {
  it("are disabled with a log line after a SIGHUP reload, and never fire into the chat", async () => {
    gateway = harness.spawnGateway();
    await gateway.stderrIncludes("gateway running");
    tg.userMessage({ text: "remind me every hour to drink water" });
    await tg.waitForSent((m) => m.text === "scheduled", 20_000);
    const [job] = await jobs();
    expect(job!.payload.creator).toMatchObject({ kind: "sender", channel: "telegram", senderId: "42" });

    // While the sender is let in, the job delivers.
    const run = (id: string) =>
      runCli(["cron", "run", id, "--config", configPath], {
        cwd: dir,
        env: { HOME: dir },
        timeoutMs: 30_000,
      });
    expect((await run(job!.id)).code).toBe(0);
    await tg.waitForSent((m) => m.text === "time for water" && m.chatId === 42, 20_000);

    // The operator takes 42 out of allowFrom and reloads.
    await writeConfig(["99"]);
    gateway.child.kill("SIGHUP");
    await gateway.stderrIncludes("channel reloaded");
    expect((await run(job!.id)).code).toBe(0);
    await waitFor(async () => (await jobs())[0]?.enabled === false, 20_000, "the job to be disabled");
    const [disabled] = await jobs();
    expect(disabled!.state.lastStatus).toBe("skipped");
    expect(disabled!.state.lastError).toMatch(
      /telegram user 42\) is no longer in channels\.telegram\.allowFrom/,
    );
    await gateway.stderrIncludes("cron job disabled");
    const scheduledTurns = llm.requests.filter((r) => lastUserText(r).includes("[Scheduled task"));
    expect(scheduledTurns).toHaveLength(1);
    expect(tg.sent.filter((m) => m.text === "time for water")).toHaveLength(1);
  });
});

describe("jobs missed while the gateway was stopped", { timeout: 120_000 }, () => {
  it("run once at the next start, at most cron.maxCatchUp of them, and never again", async () => {
    const config = gatewayConfig(dir, { llmBaseURL: llm.baseURL, telegram: tg }, { cron: { maxCatchUp: 2 } });
    await writeFile(configPath, `${JSON.stringify(config, null, 2)}\n`);
    llm.setHandler((req): FakeReply => {
      const text = lastUserText(req);
      const job = /\n(first|second|third)\n/.exec(text);
      return { content: job ? `reminder: ${job[1]}` : `re: ${text}` };
    });
    const stop = async (run: RunningCli) => {
      run.child.kill("SIGTERM");
      expect(await run.exited).toBe(0);
    };
    await stop(await harness.startGateway());

    // While it is stopped, three one-off reminders are added and their times pass.
    let lastDue = 0;
    for (const name of ["first", "second", "third"]) {
      // Far enough ahead that the add (a node start on a busy machine) is not refused as in the past.
      lastDue = Date.now() + 8000;
      const added = await runCli(
        [
          "cron",
          "add",
          "--config",
          configPath,
          "--message",
          name,
          "--at",
          new Date(lastDue).toISOString(),
        ].concat(["--channel", "telegram", "--to", "42"]),
        { cwd: dir, env: { HOME: dir }, timeoutMs: 30_000 },
      );
      expect(added.code, added.stderr).toBe(0);
    }
    await waitFor(() => Date.now() > lastDue, 30_000, "the last reminder's time to pass");

    // "gateway running" is logged once the cron service's start (its catch-up included) is over.
    const fired = (run: RunningCli) =>
      run.stderr.split("\n").filter((l) => l.includes('"msg":"cron job fired"'));
    const second = await harness.startGatewayWhen(() => true);
    expect(fired(second)).toHaveLength(2);
    const sent = (text: string) => tg.sent.filter((m) => m.text === text && m.chatId === 42);
    // Two jobs, two sessions: their turns run side by side, so their replies may come in either order.
    await waitFor(
      () => sent("reminder: second").length > 0 && sent("reminder: first").length > 0,
      30_000,
      "both reminders",
    );
    expect(sent("reminder: first")).toHaveLength(1);
    const skipped = async () => (await jobs()).find((j) => j.state.lastStatus === "skipped");
    await waitFor(
      async () => (await skipped()) !== undefined,
      20_000,
      "the third reminder recorded as skipped",
    );
    expect((await skipped())!.enabled).toBe(false);
    expect((await skipped())!.state.lastError).toMatch(/while palaver was not running/);
    await second.stderrIncludes("more missed jobs than cron.maxCatchUp");
    await stop(second);

    // Once caught up, a later start has nothing left to run.
    const third = await harness.startGatewayWhen(() => true);
    expect(fired(third)).toHaveLength(0);
    tg.userMessage({ text: "ping" });
    await tg.waitForSent((m) => m.text === "re: ping", 20_000);
    expect(sent("reminder: first")).toHaveLength(1);
    expect(sent("reminder: second")).toHaveLength(1);
    expect(sent("reminder: third")).toHaveLength(0);
    expect(llm.requests.filter((r) => lastUserText(r).includes("[Scheduled task"))).toHaveLength(2);
    await stop(third);
  });
});
