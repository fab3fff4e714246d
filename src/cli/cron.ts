/**
 * `palaver cron list|add|remove|run`: the scheduled jobs, edited in the same
 * file the gateway runs them from (`<config folder>/cron/jobs.json`). A running
 * gateway notices changes within a couple of seconds; every change is a locked
 * read-modify-write of the file, so the gateway and this command never
 * overwrite each other's jobs. With `cluster.database` set, the jobs are the
 * cluster's (palaver.cron_jobs), seen by every instance's scheduler as quickly.
 */
import { hostname } from "node:os";
import { createInterface } from "node:readline/promises";
import type { Command } from "commander";
import { createAgent } from "../create-agent.js";
import { MessageBus } from "../bus/bus.js";
import { dim } from "../channels/terminal/format.js";
import type { LoadedConfig } from "../config/load.js";
import { cronStorePath } from "../config/paths.js";
import { createWorkspace } from "../config/workspace.js";
import { buildSchedule, describeSchedule, formatTime, type ScheduleLabels } from "../cron/schedule.js";
import { CronService, type CronServiceOptions } from "../cron/service.js";
import { logger } from "../log.js";
import { errorMessage } from "../util/errors.js";
import { checkTarget, WEB_CHAT_HINT } from "../cron/targets.js";
import { SessionStore, sessionsDirOf } from "../sessions/store.js";
import { deliveryTarget, type CronJob } from "../cron/types.js";
import { addCommonOptions, guarded, loadForCli } from "./common.js";

const SHUTDOWN_GRACE_MS = 10_000;
const CLI_LABELS: ScheduleLabels = { every: "--every", cron: "--cron", at: "--at", tz: "--tz" };

interface AddOptions {
  message: string;
  every?: string;
  cron?: string;
  tz?: string;
  at?: string;
  channel: string;
  to: string;
  name?: string;
  force?: boolean;
}

export function registerCronCommand(program: Command): void {
  const cron = program
    .command("cron")
    .description("list, add, remove and run scheduled reminders and tasks (run by the gateway)");

  const list = cron
    .command("list")
    .description("list the scheduled jobs, soonest first")
    .option("--json", "print the jobs as JSON (as stored)")
    .action((opts: { json?: boolean }) =>
      guarded(() =>
        withJobs(list, async ({ service }) => {
          const jobs = await service.list();
          if (opts.json) process.stdout.write(`${JSON.stringify(jobs, null, 2)}\n`);
          else process.stdout.write(`${formatJobTable(jobs)}\n`);
        }),
      ),
    );

  const add = cron
    .command("add")
    .description(
      "add a job: --message and one of --every, --cron (with --tz) or --at, for the chat --channel/--to",
    )
    .requiredOption("--message <text>", "what to remind of, or the instruction to carry out")
    .option("--every <seconds>", "repeat every this many seconds (at least 10)")
    .option("--cron <expr>", 'a 5-field cron expression, e.g. "0 9 * * 1-5"')
    .option("--tz <zone>", "IANA time zone for --cron or --at (default: this machine's)")
    .option("--at <iso>", "once, at an ISO date-time such as 2026-02-12T10:30")
    .requiredOption(
      "--channel <name>",
      "the channel of the chat to deliver to (telegram, slack, discord, web, or cli for a `palaver chat` session)",
    )
    .requiredOption("--to <chatId>", "the chat id to deliver to")
    .option("--name <name>", "a short label (default: the start of the message)")
    .option("--force", "add it even for a platform that is not enabled (its replies wait until it is)")
    .action((opts: AddOptions) =>
      guarded(() =>
        withJobs(add, async ({ service, loaded, cluster }) => {
          // A typo would be accepted, fire, and reach nobody: refuse it before anything is written.
          const target = checkTarget(loaded.config, opts.channel, opts.to);
          if (!target.ok) throw new Error(`--channel: ${target.error}`);
          const everySeconds = opts.every !== undefined ? Number(opts.every) : undefined;
          if (everySeconds !== undefined && !Number.isInteger(everySeconds)) {
            throw new Error(`--every must be a whole number of seconds (got "${opts.every}")`);
          }
          const { schedule, deleteAfterRun } = buildSchedule(
            { everySeconds, cronExpr: opts.cron, tz: opts.tz, at: opts.at },
            service.now(),
            CLI_LABELS,
          );
          // After the schedule is checked, so a question is asked only about a job that can be added.
          if (target.notEnabled && !opts.force && !(await confirmNotEnabled(opts.channel))) {
            throw new Error(notEnabledRefusal(opts.channel));
          }
          const job = await service.add({
            name: opts.name,
            message: opts.message,
            schedule,
            deleteAfterRun,
            channel: opts.channel,
            to: opts.to,
            // The operator's own job: not tied to anyone's place in allowFrom.
            creator: { kind: "operator" },
          });
          const next =
            job.state.nextRunAtMs != null
              ? formatTime(job.state.nextRunAtMs, job.schedule.tz ?? undefined)
              : "never";
          process.stdout.write(
            `Added job ${job.id} (${job.name}): ${describeSchedule(job.schedule)}, next run ${next}, to ${opts.channel}:${opts.to}\n`,
          );
          if (target.note) process.stderr.write(`${target.note}\n`);
          // A cluster's instances have no pid file here; `palaver status` shows them.
          if (!cluster && !(await gatewayRunning(service))) {
            process.stdout.write(
              dim("The gateway is not running: the job runs once it is started.\n", process.stdout.isTTY),
            );
          }
        }),
      ),
    );

  const remove = cron
    .command("remove")
    .description("remove a job")
    .argument("<id>", "the job id (see `palaver cron list`)")
    .action((id: string) =>
      guarded(() =>
        withJobs(remove, async ({ service }) => {
          if (!(await service.remove(id))) throw new Error(`no cron job with id ${id}`);
          process.stdout.write(`Removed job ${id}\n`);
        }),
      ),
    );

  const run = cron
    .command("run")
    .description(
      "run a job now. With the gateway running, it runs there and the reply goes to the job's chat. " +
        "Otherwise it runs here: the reply is printed (not delivered, since the channels only run in the gateway) " +
        "and the job's schedule is left as it is.",
    )
    .argument("<id>", "the job id (see `palaver cron list`)")
    .action((id: string) =>
      guarded(() =>
        withJobs(run, async ({ service, loaded, cluster }) => {
          const job = await service.get(id);
          if (!job) throw new Error(`no cron job with id ${id}`);
          const target = deliveryTarget(job.payload);
          const where = target ? `${target.channel}:${target.chatId}` : "(no chat)";
          if (cluster) {
            // Marked due now in the database: the first instance to look (every 2 s) runs it.
            await service.requestRun(id);
            process.stdout.write(
              `Asked the cluster to run job ${id} now (an instance runs it within seconds, or as soon as one starts); the reply goes to ${where}.\n`,
            );
            return;
          }
          if (await gatewayRunning(service)) {
            await service.requestRun(id);
            process.stdout.write(
              `Asked the running gateway to run job ${id} now; the reply goes to ${where}.\n`,
            );
            return;
          }
          if (!target) throw new Error(`job ${id} has no chat to deliver to (payload.channel / payload.to)`);
          await runHere(loaded, id);
          process.stderr.write(
            dim(
              `(not delivered to ${where}: the channels only run in the gateway, which is not running)\n`,
              process.stderr.isTTY,
            ),
          );
        }),
      ),
    );

  for (const cmd of [list, add, remove, run]) addCommonOptions(cmd);
}

/** Pure: why `cron add` refuses a platform that is not enabled, and what to do instead. */
function notEnabledRefusal(channel: string): string {
  return (
    `channels.${channel} is not enabled, so this job's replies would only wait in the outbox: ` +
    `enable it (channels.${channel}.enabled), or add --force to keep the job anyway; ${WEB_CHAT_HINT}`
  );
}

/** On a terminal, asks whether to add the job all the same; elsewhere (a script) the answer is no. */
async function confirmNotEnabled(channel: string): Promise<boolean> {
  if (!process.stdin.isTTY || !process.stdout.isTTY) return false;
  const rl = createInterface({ input: process.stdin, output: process.stdout });
  try {
    const answer = await rl.question(
      `channels.${channel} is not enabled: this job's replies will wait until it is.\n` +
        `(${WEB_CHAT_HINT})\nAdd it anyway? [y/N] `,
    );
    return /^y(es)?$/i.test(answer.trim());
  } finally {
    rl.close();
  }
}

/** Runs the job's turn with an agent in this process and prints what it answers. */
async function runHere(loaded: LoadedConfig, id: string): Promise<void> {
  createWorkspace(loaded.workspace);
  const bus = new MessageBus();
  const { loop, cron } = createAgent({
    config: loaded.config,
    workspace: loaded.workspace,
    bus,
    cronStorePath: cronStorePath(loaded.path),
    configPath: loaded.path,
  });
  bus.onOutbound((msg) => {
    if ((msg.kind ?? "final") === "final") process.stdout.write(`${msg.content}\n`);
    else process.stderr.write(`${dim(msg.content, process.stderr.isTTY)}\n`);
  });
  loop.start();
  try {
    await cron.run(id, { keepSchedule: true });
    await loop.idle();
  } finally {
    await loop.shutdown(SHUTDOWN_GRACE_MS);
  }
}

/** Whether a gateway runs the jobs: the pid file beside the jobs file. */
async function gatewayRunning(service: CronService): Promise<boolean> {
  return service.storePath !== undefined && CronService.runningElsewhere(service.storePath);
}

interface Jobs {
  service: CronService;
  loaded: LoadedConfig;
  /** The jobs are the cluster's (cluster.database), not this host's jobs.json. */
  cluster: boolean;
}

/** Runs `work` on the jobs: jobs.json, or the cluster's database when cluster.database is set. */
async function withJobs(cmd: Command, work: (jobs: Jobs) => Promise<void>): Promise<void> {
  // Info logs would land between the lines this command prints; --verbose brings them back.
  const loaded = loadForCli(cmd, { level: "warn" });
  const common: Pick<CronServiceOptions, "bus" | "maxCatchUp"> = {
    // Only `run` fires jobs, on a bus of its own (runHere).
    bus: { publishInbound: () => undefined },
    maxCatchUp: loaded.config.cron.maxCatchUp,
  };
  const url = loaded.config.cluster.database;
  if (url === undefined) {
    // A removed job's session file goes with it (`cron remove`).
    const sessions = new SessionStore(sessionsDirOf(loaded.workspace));
    const service = new CronService({ storePath: cronStorePath(loaded.path), sessions, ...common });
    try {
      return await work({ service, loaded, cluster: false });
    } finally {
      await sessions.close();
    }
  }
  // Loaded here: in one process the cron commands do not load the PostgreSQL client.
  const [{ openDatabase, shownUrl }, { migrate }, { PgCronStore }, { PgSessionStore }] = await Promise.all([
    import("../db/pool.js"),
    import("../db/schema.js"),
    import("../cron/pg-store.js"),
    import("../sessions/pg-store.js"),
  ]);
  const log = logger("cron");
  const me = `${hostname()}-${process.pid}-cli`;
  const db = openDatabase({ url, applicationName: `palaver ${me}`, log });
  try {
    try {
      await migrate(db, log);
    } catch (err) {
      throw new Error(`cluster.database ${shownUrl(url)}: ${errorMessage(err)}`, { cause: err });
    }
    const store = new PgCronStore({ db, instance: me, log });
    // The cluster's sessions: a removed job's session rows go with it.
    const sessions = new PgSessionStore(db, log);
    try {
      await work({ service: new CronService({ store, sessions, ...common }), loaded, cluster: true });
    } finally {
      await sessions.close();
    }
  } finally {
    await db.end();
  }
}

/** Pure: the jobs as a table for `palaver cron list`. */
export function formatJobTable(jobs: CronJob[]): string {
  if (jobs.length === 0) return "No cron jobs. Add one with `palaver cron add` (or ask the assistant).";
  const rows = jobs.map((job) => {
    const target = deliveryTarget(job.payload);
    const next =
      job.state.nextRunAtMs != null
        ? formatTime(job.state.nextRunAtMs, job.schedule.tz ?? undefined)
        : job.enabled
          ? "never"
          : "disabled";
    const last = job.state.lastStatus
      ? `${job.state.lastStatus}${job.state.lastError ? `: ${job.state.lastError}` : ""}`
      : "-";
    return [
      job.id,
      job.name,
      describeSchedule(job.schedule),
      next,
      target ? `${target.channel}:${target.chatId}` : "-",
      last,
    ];
  });
  const header = ["ID", "NAME", "SCHEDULE", "NEXT RUN", "CHAT", "LAST"];
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  return [header, ...rows]
    .map((r) => r.map((c, i) => (i === r.length - 1 ? c : c.padEnd(widths[i]!))).join("  "))
    .join("\n");
}
