/**
 * `palaver cron` run as real child processes (the build, dist/main.js), with
 * HOME and PALAVER_CONFIG in a temp folder. A "gateway" is a CronService
 * started in this test process on the same job file.
 */
import { existsSync } from "node:fs";
import { mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { pino } from "pino";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { InboundMessage } from "../../src/bus/types.js";
import { cronStorePath } from "../../src/config/paths.js";
import { CronService } from "../../src/cron/service.js";
import type { CronJob } from "../../src/cron/types.js";
import { FakeOpenAI } from "../fakes/openai-server.js";
import { CHILD_TIMEOUT_MS, runCli, type CliResult } from "../helpers/cli.js";
import { DIST_MAIN } from "../helpers/dist.js";
import { haveCommand, requireOrSkip } from "../helpers/requires.js";
import { onTerminal } from "../helpers/terminal.js";
import { waitFor } from "../helpers/wait.js";

const NO_SCRIPT = requireOrSkip(
  haveCommand("script")
    ? ""
    : "the terminal test of cron add needs util-linux `script` (apt-get install bsdutils)",
);

let dir: string;
let home: string;
let configPath: string;
let storePath: string;
let gateway: CronService | undefined;
let fake: FakeOpenAI | undefined;

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), "palaver-cron-cli-"));
  home = join(dir, "home");
  await mkdir(home);
  configPath = join(dir, "conf", "config.json");
  await mkdir(dirname(configPath));
  await writeFile(configPath, JSON.stringify({ agents: { defaults: { workspace: join(dir, "ws") } } }));
  storePath = cronStorePath(configPath);
});
afterEach(async () => {
  await gateway?.stop();
  gateway = undefined;
  await fake?.close();
  fake = undefined;
  await rm(dir, { recursive: true, force: true });
});

function cli(args: string[]): Promise<CliResult> {
  return runCli(["cron", ...args], {
    cwd: dir,
    env: { HOME: home, PALAVER_CONFIG: configPath, PALAVER_LOG_LEVEL: "silent" },
  });
}

async function jobsOnDisk(): Promise<CronJob[]> {
  try {
    return (JSON.parse(await readFile(storePath, "utf8")) as { jobs: CronJob[] }).jobs;
  } catch {
    return [];
  }
}

// Each child process takes about a second to start (many more under load); tests/helpers/cli.ts
// runs two at a time, so the limits below cover a dozen children on a busy machine.
describe("palaver cron add / list / remove", { timeout: 180_000 }, () => {
  it("adds jobs to <config folder>/cron/jobs.json and lists them", async () => {
    const added = await cli([
      "add",
      "--message",
      "water the plants",
      "--every",
      "3600",
      "--channel",
      "telegram",
      "--to",
      "42",
      "--force",
    ]);
    // Issue 12: a job for a platform that is configured but not enabled is accepted (with --force) with a warning.
    expect(added.stderr).toBe(
      "warning: channels.telegram is not enabled, so this job's replies wait (kept by the gateway) until it is " +
        "(set channels.telegram.enabled and reload the gateway)\n",
    );
    expect(added.code).toBe(0);
    expect(added.stdout).toMatch(
      /^Added job [0-9a-f]{8} \(water the plants\): every 1h, next run .*, to telegram:42\n/,
    );
    expect(added.stdout).toContain("The gateway is not running");
    const cronAdd = await cli([
      "add",
      "--message",
      "stand-up",
      "--cron",
      "0 9 * * 1-5",
      "--tz",
      "Europe/Paris",
      "--channel",
      "slack",
      "--to",
      "C1",
      "--name",
      "standup",
      "--force",
    ]);
    expect(cronAdd.code).toBe(0);

    const jobs = await jobsOnDisk();
    expect(jobs.map((j) => [j.name, j.schedule.kind, j.payload.channel, j.payload.to])).toEqual([
      ["water the plants", "every", "telegram", "42"],
      ["standup", "cron", "slack", "C1"],
    ]);

    const list = await cli(["list"]);
    expect(list.code).toBe(0);
    const lines = list.stdout.trim().split("\n");
    expect(lines[0]).toMatch(/^ID\s+NAME\s+SCHEDULE\s+NEXT RUN\s+CHAT\s+LAST$/);
    expect(lines.slice(1).join("\n")).toContain("standup");
    expect(list.stdout).toContain("cron 0 9 * * 1-5 (Europe/Paris)");
    expect(list.stdout).toContain("telegram:42");

    const json = await cli(["list", "--json"]);
    const parsed = JSON.parse(json.stdout) as CronJob[];
    expect(parsed.map((j) => j.id).sort()).toEqual(jobs.map((j) => j.id).sort());

    // The job's turns ran in its own session: that file goes with the job (issue 13).
    const sessionFile = join(dir, "ws", "sessions", `cron_${jobs[0]!.id}.jsonl`);
    await mkdir(dirname(sessionFile), { recursive: true });
    await writeFile(sessionFile, "{}\n");
    const removed = await cli(["remove", jobs[0]!.id]);
    expect(removed).toMatchObject({ code: 0, stdout: `Removed job ${jobs[0]!.id}\n` });
    expect((await jobsOnDisk()).map((j) => j.name)).toEqual(["standup"]);
    expect(existsSync(sessionFile)).toBe(false);

    const missing = await cli(["remove", "deadbeef"]);
    expect(missing).toMatchObject({ code: 1, stderr: "palaver: no cron job with id deadbeef\n" });
  });

  it("refuses a channel the config does not know (a typo), naming the ones that exist", async () => {
    const typo = await cli(["add", "--message", "x", "--every", "60", "--channel", "telegarm", "--to", "1"]);
    expect(typo.code).toBe(1);
    expect(typo.stdout).toBe("");
    expect(typo.stderr).toMatch(/^palaver: --channel: unknown channel "telegarm": the channels are /);
    for (const name of ["telegram", "slack", "discord", "cli"]) expect(typo.stderr).toContain(name);
    expect(await jobsOnDisk()).toEqual([]);
  });

  it("accepts an enabled platform silently and says where a terminal chat's reminders show", async () => {
    await writeFile(
      configPath,
      JSON.stringify({
        agents: { defaults: { workspace: join(dir, "ws") } },
        channels: { telegram: { enabled: true, token: "123:abc", allowFrom: ["*"] } },
      }),
    );
    const enabled = await cli([
      "add",
      "--message",
      "x",
      "--every",
      "60",
      "--channel",
      "telegram",
      "--to",
      "1",
    ]);
    expect(enabled).toMatchObject({ code: 0, stderr: "" });
    const terminal = await cli([
      "add",
      "--message",
      "y",
      "--every",
      "60",
      "--channel",
      "cli",
      "--to",
      "direct",
    ]);
    expect(terminal.code).toBe(0);
    expect(terminal.stderr).toContain("fires in this terminal chat while `palaver chat` is open");
    expect((await jobsOnDisk()).map((j) => j.payload.channel)).toEqual(["telegram", "cli"]);
  });

  it("refuses a platform that is not enabled without --force, off a terminal, and says where web reminders go", async () => {
    // Issue 35: such a job's replies would only wait in the outbox; a script must say --force.
    const added = await cli([
      "add",
      "--message",
      "x",
      "--every",
      "3600",
      "--channel",
      "telegram",
      "--to",
      "42",
    ]);
    expect(added.code).toBe(1);
    expect(added.stderr).toBe(
      "palaver: channels.telegram is not enabled, so this job's replies would only wait in the outbox: " +
        "enable it (channels.telegram.enabled), or add --force to keep the job anyway; for the web chat, use " +
        "--channel web --to <conversation id> (the part after #c= in the web chat's address), or ask the " +
        "assistant there to set the reminder\n",
    );
    expect(await jobsOnDisk()).toEqual([]);
  });

  it.skipIf(NO_SCRIPT)(
    "on a terminal, asks before adding a job for a platform that is not enabled: n writes nothing, y adds it",
    async () => {
      const PROMPT = "Add it anyway? [y/N] ";
      /** `cron add` for telegram (configured, not enabled) on a pseudo-terminal, answered with `answer`. */
      const addAnswering = async (answer: string) => {
        const term = onTerminal(
          [
            DIST_MAIN,
            "cron",
            "add",
            "--message",
            "stretch",
            "--every",
            "3600",
            "--channel",
            "telegram",
            "--to",
            "42",
            "--config",
            configPath,
          ],
          { cwd: dir, home },
        );
        let ended = false;
        void term.exited.then(() => (ended = true));
        try {
          // Or its end: a CLI that never asks fails below at once rather than after the wait.
          await waitFor(() => term.screen.includes(PROMPT) || ended, CHILD_TIMEOUT_MS, "the y/N question");
          expect(term.screen, "the question before any answer").toContain(PROMPT);
          term.child.stdin.write(`${answer}\r`);
          const code = await term.exited;
          return { code, screen: term.screen.replaceAll("\r", "") };
        } finally {
          term.child.kill();
        }
      };

      const no = await addAnswering("n");
      expect(no.screen).toContain(
        "channels.telegram is not enabled: this job's replies will wait until it is.",
      );
      expect(no.screen).toContain("--channel web --to <conversation id>");
      expect(no.code).toBe(1);
      expect(no.screen).toContain(
        "palaver: channels.telegram is not enabled, so this job's replies would only wait",
      );
      expect(no.screen).not.toContain("Added job");
      expect(await jobsOnDisk()).toEqual([]);

      const yes = await addAnswering("y");
      expect(yes.code).toBe(0);
      expect(yes.screen).toMatch(/Added job \S+ \(stretch\): .*, to telegram:42\n/);
      expect((await jobsOnDisk()).map((j) => [j.payload.channel, j.payload.to, j.payload.message])).toEqual([
        ["telegram", "42", "stretch"],
      ]);
    },
  );

  it("an empty list says how to add a job", async () => {
    const list = await cli(["list"]);
    expect(list).toMatchObject({ code: 0 });
    expect(list.stdout).toContain("No cron jobs");
  });

  it("refuses bad schedules with exit code 1 and one clear line", async () => {
    const base = ["add", "--message", "x", "--channel", "telegram", "--to", "1"];
    const cases: [string[], string][] = [
      [[], "palaver: no schedule: give one of --every, --cron or --at\n"],
      [
        ["--every", "60", "--cron", "0 9 * * *"],
        "palaver: more than one schedule (--every and --cron): give only one of --every, --cron or --at\n",
      ],
      [
        ["--cron", "0 9 * * *", "--tz", "Mars/Base"],
        'palaver: unknown timezone "Mars/Base": use an IANA name such as "Europe/Paris"\n',
      ],
      [["--at", "2001-01-01T00:00:00Z"], "is in the past"],
      [["--every", "soon"], 'palaver: --every must be a whole number of seconds (got "soon")\n'],
      [["--cron", "0 9 * *"], "expected 5 fields"],
    ];
    const runs = await Promise.all(cases.map(([extra]) => cli([...base, ...extra])));
    runs.forEach((run, i) => {
      expect(run.code).toBe(1);
      expect(run.stdout).toBe("");
      expect(run.stderr).toContain(cases[i]![1]);
    });
    expect(await jobsOnDisk()).toEqual([]);
  });
});

describe("palaver cron run", { timeout: 120_000 }, () => {
  it("with a gateway running, asks it to run the job (it fires within a poll)", async () => {
    const published: InboundMessage[] = [];
    gateway = new CronService({
      storePath,
      bus: { publishInbound: (m) => published.push(m) },
      maxCatchUp: 5,
      log: pino({ level: "silent" }),
      pollIntervalMs: 50,
    });
    await gateway.start();
    const job = await gateway.add({
      message: "report",
      schedule: { kind: "cron", expr: "0 9 * * *", tz: "UTC" },
      channel: "slack",
      to: "C1",
    });
    const run = await cli(["run", job.id]);
    expect(run.code).toBe(0);
    expect(run.stdout).toBe(
      `Asked the running gateway to run job ${job.id} now; the reply goes to slack:C1.\n`,
    );
    await waitFor(() => published.length === 1);
    expect(published[0]).toMatchObject({ chatId: "slack:C1", sessionKey: `cron:${job.id}` });
  });

  it("without a gateway, runs the turn here and prints the reply (not delivered)", async () => {
    fake = await FakeOpenAI.start();
    fake.enqueue({ content: "Time to water the plants!" });
    await writeFile(
      configPath,
      JSON.stringify({
        agents: {
          defaults: {
            workspace: join(dir, "ws"),
            provider: "custom",
            model: "fake-model",
            llm: { maxRetries: 0, timeout: 5 },
          },
        },
        providers: { custom: { apiKey: "test-key", apiBase: fake.baseURL } },
      }),
    );
    const added = await cli([
      "add",
      "--message",
      "remind me to water the plants",
      "--every",
      "3600",
      "--channel",
      "telegram",
      "--to",
      "42",
      "--force",
    ]);
    const [job] = await jobsOnDisk();
    expect(added.code).toBe(0);

    const run = await cli(["run", job!.id]);
    expect(run.code).toBe(0);
    expect(run.stdout).toBe("Time to water the plants!\n");
    expect(run.stderr).toContain(
      "(not delivered to telegram:42: the channels only run in the gateway, which is not running)",
    );
    const sent = JSON.stringify(fake.requests[0]!.body.messages);
    expect(sent).toContain(`[Scheduled task \\"remind me to water the plants\\" (job ${job!.id})]`);

    // Recorded, but the schedule is left as it was.
    const [after] = await jobsOnDisk();
    expect(after!.state.nextRunAtMs).toBe(job!.state.nextRunAtMs);
    expect(after!.state.lastStatus).toBe("ok");
  });

  it("an unknown id is an error", async () => {
    expect(await cli(["run", "deadbeef"])).toMatchObject({
      code: 1,
      stderr: "palaver: no cron job with id deadbeef\n",
    });
  });
});
