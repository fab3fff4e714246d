/**
 * The real `palaver gateway` as a child process against loopback fakes:
 * a config naming FakeOpenAI and any of FakeTelegram, FakeSlack and
 * FakeDiscord, and the health endpoint's address read from the child's log.
 * Used by the crash tests and the startup and throughput benchmarks;
 * GatewayHarness below is the tests' shared setup for such a child.
 */
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { FakeDiscord } from "../fakes/discord-server.js";
import { FakeOpenAI } from "../fakes/openai-server.js";
import type { FakeSlack } from "../fakes/slack-server.js";
import { FakeTelegram } from "../fakes/telegram-server.js";
import { startCli, type RunningCli } from "./cli.js";
import { waitFor } from "./wait.js";

export interface GatewayFakes {
  /** FakeOpenAI's baseURL (or that of a fake LLM in another process). */
  llmBaseURL: string;
  telegram?: FakeTelegram;
  slack?: FakeSlack;
  discord?: FakeDiscord;
}

type Json = Record<string, unknown>;

/**
 * A gateway config for `dir` (workspace `dir/ws`, health endpoint on a free
 * port, heartbeat off, every sender allowed) with the given fakes enabled;
 * `overrides` is merged in deeply.
 */
export function gatewayConfig(dir: string, fakes: GatewayFakes, overrides: Json = {}): Json {
  // Not streamed unless a test streams: these tests count the platform's posts of each final.
  const channels: Json = { sendProgress: false, sendToolHints: false, streaming: false };
  if (fakes.telegram) {
    channels.telegram = {
      enabled: true,
      token: fakes.telegram.token,
      apiRoot: fakes.telegram.apiRoot,
      allowFrom: ["*"],
      pollTimeout: 5,
    };
  }
  if (fakes.slack) {
    channels.slack = {
      enabled: true,
      mode: "socket",
      botToken: fakes.slack.botToken,
      appToken: fakes.slack.appToken,
      apiUrl: fakes.slack.apiUrl,
      allowFrom: ["*"],
    };
  }
  if (fakes.discord) {
    channels.discord = {
      enabled: true,
      token: fakes.discord.token,
      apiUrl: fakes.discord.apiUrl,
      allowFrom: ["*"],
    };
  }
  const base: Json = {
    agents: {
      defaults: {
        workspace: join(dir, "ws"),
        provider: "custom",
        model: "fake-model",
        llm: { maxRetries: 0, timeout: 60 },
      },
    },
    providers: { custom: { apiKey: "sk-fake", apiBase: fakes.llmBaseURL } },
    channels,
    gateway: { host: "127.0.0.1", port: 0, heartbeat: { enabled: false } },
    // Off unless a test turns approvals on: a prompt would wait for a person who is not there.
    tools: { approval: { mode: "off" } },
  };
  return deepMerge(base, overrides);
}

/** Writes gatewayConfig(...) to `dir/config.json` and returns the path. */
export async function writeGatewayConfig(
  dir: string,
  fakes: GatewayFakes,
  overrides: Json = {},
): Promise<string> {
  const path = join(dir, "config.json");
  await writeFile(path, `${JSON.stringify(gatewayConfig(dir, fakes, overrides), null, 2)}\n`);
  return path;
}

/** The health endpoint's URL from the gateway's JSON log ("health endpoint listening"), once logged. */
export function healthUrlFromLog(stderr: string): string | undefined {
  for (const line of stderr.split("\n")) {
    if (!line.includes("health endpoint listening")) continue;
    try {
      const entry = JSON.parse(line) as { url?: unknown };
      if (typeof entry.url === "string") return entry.url;
    } catch {
      // not a JSON log line (pretty logging): keep looking
    }
  }
  return undefined;
}

/** A Telegram getUpdates call that long-polls (timeout > 0): the gateway is ready for messages. */
export function isLongPoll(call: { params: Record<string, unknown> }): boolean {
  return typeof call.params.timeout === "number" && call.params.timeout > 0;
}

export interface GatewayHarnessOptions {
  /** Prefix of the temp folder (the state folder and HOME of every child). */
  prefix: string;
  /** Start FakeTelegram and write a config with it (default true); false: the test writes its own config. */
  telegram?: boolean;
  /** Hard limit for one child: a test that hangs is killed, never left behind. */
  childLimitMs?: number;
  /** Limit for startGateway's wait: a child takes seconds to start on a busy 2-core machine. */
  startupMs?: number;
  /** What the children run (startCli's entry): default MAIN, the build in dist/. */
  entry?: string;
}

/** Generous defaults: far above a loaded machine's start time, and a hang still ends. */
export const GATEWAY_CHILD_LIMIT_MS = 60_000;
export const GATEWAY_STARTUP_MS = 30_000;

/**
 * The shared setup of the tests that drive `palaver gateway` children: a temp
 * folder, FakeOpenAI (and FakeTelegram with a config naming both), and every
 * child it spawned SIGKILLed on close(). Plain start()/close() rather than
 * vitest hooks, so this module stays importable by the benchmarks; a test
 * file calls them from its own beforeEach/afterEach.
 */
export class GatewayHarness {
  readonly childLimitMs: number;
  readonly startupMs: number;
  private readonly opts: GatewayHarnessOptions;
  private state?: { dir: string; llm: FakeOpenAI; tg?: FakeTelegram };
  private readonly children: RunningCli[] = [];
  private readonly cleanups: (() => Promise<void>)[] = [];
  /** The config every spawned gateway is given (set by start() when it writes one). */
  configPath = "";

  constructor(opts: GatewayHarnessOptions) {
    this.opts = opts;
    this.childLimitMs = opts.childLimitMs ?? GATEWAY_CHILD_LIMIT_MS;
    this.startupMs = opts.startupMs ?? GATEWAY_STARTUP_MS;
  }

  get dir(): string {
    return this.started().dir;
  }

  get llm(): FakeOpenAI {
    return this.started().llm;
  }

  get tg(): FakeTelegram {
    const { tg } = this.started();
    if (!tg) throw new Error("this harness runs without FakeTelegram");
    return tg;
  }

  async start(): Promise<void> {
    const dir = await mkdtemp(join(tmpdir(), this.opts.prefix));
    const llm = await FakeOpenAI.start();
    const tg = this.opts.telegram === false ? undefined : await FakeTelegram.start();
    this.state = { dir, llm, tg };
    this.configPath = tg ? await writeGatewayConfig(dir, { llmBaseURL: llm.baseURL, telegram: tg }) : "";
  }

  /** Runs `fn` on close(), after the children are gone (e.g. a fake the test started itself). */
  onClose(fn: () => Promise<void>): void {
    this.cleanups.push(fn);
  }

  async close(): Promise<void> {
    // Whatever happened in the test, no gateway outlives it.
    for (const run of this.children.splice(0)) {
      if (run.child.exitCode === null && run.child.signalCode === null) run.child.kill("SIGKILL");
      await run.exited.catch(() => undefined);
    }
    for (const cleanup of this.cleanups.splice(0)) await cleanup();
    const state = this.state;
    this.state = undefined;
    this.configPath = "";
    if (!state) return;
    await state.tg?.close();
    await state.llm.close();
    await rm(state.dir, { recursive: true, force: true });
  }

  /**
   * Spawns `palaver gateway --config <configPath>` (default this.configPath),
   * HOME the temp folder plus `env`, killed on close().
   */
  spawnGateway(opts: { configPath?: string; env?: NodeJS.ProcessEnv } = {}): RunningCli {
    const env = opts.env ?? {};
    const run = startCli(["gateway", "--config", opts.configPath ?? this.configPath], {
      cwd: this.dir,
      env: { HOME: this.dir, ...env },
      timeoutMs: this.childLimitMs,
      ...(this.opts.entry ? { entry: this.opts.entry } : {}),
    });
    this.children.push(run);
    return run;
  }

  /** Spawns a gateway and resolves once it long-polls Telegram (ready for messages). */
  async startGateway(): Promise<RunningCli> {
    const tg = this.tg;
    const pollsBefore = tg.callsTo("getUpdates").filter(isLongPoll).length;
    const run = this.spawnGateway();
    const died = run.exited.then((code) => {
      throw new Error(`the gateway exited (${code}) before it was ready:\n${run.stderr}`);
    });
    const polling = tg.waitFor(
      () => tg.callsTo("getUpdates").filter(isLongPoll).length > pollsBefore,
      this.startupMs,
      "the gateway's long poll",
    );
    // Whichever loses the race must not surface later as an unhandled rejection.
    died.catch(() => undefined);
    polling.catch(() => undefined);
    await Promise.race([polling, died]);
    return run;
  }

  /**
   * Spawns a gateway and resolves once it logged "gateway running" (every channel's first start has
   * settled) and `ready` holds (e.g. connected to the platform's fake). Not /readyz: it can answer
   * 200 before the channels are registered.
   */
  async startGatewayWhen(ready: () => boolean): Promise<RunningCli> {
    const run = this.spawnGateway();
    let exited = false;
    void run.exited.then(() => (exited = true));
    await waitFor(
      () => {
        if (exited) throw new Error(`the gateway exited before it was ready:\n${run.stderr}`);
        return run.stderr.includes('"msg":"gateway running"') && ready();
      },
      this.startupMs,
      "the gateway to run, connected to the platform",
    );
    return run;
  }

  /** SIGKILLs a gateway and waits until it is gone. */
  async kill(run: RunningCli): Promise<void> {
    run.child.kill("SIGKILL");
    await run.exited;
  }

  private started(): { dir: string; llm: FakeOpenAI; tg?: FakeTelegram } {
    if (!this.state) throw new Error("GatewayHarness used before start()");
    return this.state;
  }
}

function isObject(v: unknown): v is Json {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

function deepMerge(base: Json, extra: Json): Json {
  const out: Json = { ...base };
  for (const [key, value] of Object.entries(extra)) {
    const current = out[key];
    out[key] = isObject(current) && isObject(value) ? deepMerge(current, value) : value;
  }
  return out;
}
