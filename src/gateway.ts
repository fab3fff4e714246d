/**
 * The daemon: channels, agent loop, cron and heartbeat running together.
 * Start order: agent, channels, then what an earlier run left unfinished,
 * the scheduler and the heartbeat (their replies need the channels' routing).
 * Stop order: intake closed, running turns finished (bounded), background
 * work settled, then channels stopped in reverse order so the last replies
 * still go out.
 */
import { join } from "node:path";
import { MessageBus } from "./bus/bus.js";
import { createAgent, type Agent } from "./create-agent.js";
import { describeSandbox } from "./agent/tools/exec/sandbox.js";
import type { ClusterNode } from "./cluster/node.js";
import type { JoinCluster } from "./cluster-stores.js";
import { ChannelManager } from "./channels/manager.js";
import {
  createEnabledChannels,
  creatingEnabledChannels,
  PLATFORMS,
  type ChannelFactory,
  type GatewayServices,
  type PlatformName,
} from "./channels/registry.js";
import { adminsOf, allowFromOf } from "./config/allow-from.js";
import type { LoadedConfig } from "./config/load.js";
import type { Config } from "./config/schema.js";
import { cronStorePath, stateDir } from "./config/paths.js";
import { createWorkspace } from "./config/workspace.js";
import { evaluateReadiness, HealthServer } from "./daemon/health.js";
import { heldStatusLines, messageJournalPath } from "./daemon/outbox-file.js";
import { Journal, type JournalIo } from "./daemon/journal.js";
import { StateLock } from "./daemon/lock.js";
import { sessionsDirOf } from "./sessions/store.js";
import { Metrics } from "./daemon/metrics.js";
import { ToolJournal } from "./daemon/tool-journal.js";
import { HeartbeatService } from "./heartbeat/heartbeat.js";
import { createLlm, ResilientProvider } from "./llm/resilient.js";
import type { Provider } from "./llm/types.js";
import { logger, type Logger } from "./log.js";
import { palaverVersion } from "./util/package-root.js";
import { PairingGate } from "./pairing/gate.js";
import { pairingPath, PairingStore } from "./pairing/store.js";

export interface GatewayOptions {
  loaded: Pick<LoadedConfig, "config" | "path" | "workspace">;
  /** Replaces the configured LLM provider (tests). */
  provider?: Provider;
  /** Replaces the platform registry (tests inject loopback channels). */
  platforms?: Partial<Record<string, ChannelFactory | undefined>>;
  /** Backoff of a channel that fails to start (default 2 s doubling to 5 min). */
  channelRetryBaseMs?: number;
  /** Replaces the journal's file operations (tests: a full disk). */
  journalIo?: Partial<JournalIo>;
  log?: Logger;
}

export class Gateway {
  readonly bus = new MessageBus();
  readonly agent: Agent;
  readonly channels: ChannelManager;
  readonly heartbeat: HeartbeatService;
  readonly journal: Journal;
  readonly toolJournal: ToolJournal;
  readonly metrics: Metrics;
  readonly health: HealthServer;
  /** Who may write in direct messages besides allowFrom (dmPolicy "pairing"), and their welcomes. */
  readonly pairing: PairingGate;
  /** This process's part of a cluster (cluster.database set); undefined: one process, plain files. */
  readonly cluster: ClusterNode | undefined;
  /** What channels use of the cluster: leases for a single ingress, the web chat's relay and token. */
  private readonly clusterServices: Partial<GatewayServices>;
  private readonly log: Logger;
  private readonly locks: StateLock[] = [];
  /** Set once channels, replay, cron and heartbeat have started: /readyz says "starting" until then. */
  private running = false;
  /** Aborted by stop(): a start still under way gives up at its next step (pending connects are aborted). */
  private readonly stopping = new AbortController();
  private starting: Promise<void> | null = null;

  /**
   * Builds the gateway; in cluster mode (cluster.database set) after loading the cluster side
   * (cluster-stores.ts), which only then comes in: one process does not load the PostgreSQL client.
   */
  static async create(opts: GatewayOptions): Promise<Gateway> {
    const clusterSide = opts.loaded.config.cluster.database ? await import("./cluster-stores.js") : undefined;
    return new Gateway(opts, clusterSide?.joinCluster);
  }

  /** `joinCluster`: cluster-stores.ts's, needed in cluster mode (Gateway.create passes it). */
  constructor(
    private readonly opts: GatewayOptions,
    joinCluster?: JoinCluster,
  ) {
    const { config, workspace, path } = opts.loaded;
    this.log = opts.log ?? logger("gateway");
    this.toolJournal = new ToolJournal(join(stateDir(path), "journal", "tools.jsonl"));
    this.journal = new Journal(messageJournalPath(stateDir(path)), {
      ...(opts.journalIo ? { io: opts.journalIo } : {}),
    });
    this.metrics = new Metrics({
      queueDepth: () => this.agent.loop.pending,
      activeTurns: () => this.agent.loop.activeTurns,
      activeSubagents: () => this.agent.subagents.active,
      cluster: () => this.cluster?.counts(),
    });
    const llm = opts.provider ?? createLlm(config);
    const url = config.cluster.database;
    if (url && !joinCluster)
      throw new Error(
        "cluster.database is set: build the gateway with Gateway.create (it loads the cluster side)",
      );
    const cluster =
      url && joinCluster
        ? joinCluster({
            url,
            workspace,
            version: palaverVersion(),
            turnTimeoutSeconds: config.cluster.turnTimeoutSeconds,
            concurrency: config.agents.defaults.maxConcurrentTurns,
            // Queued turns run in this loop; what the bus carries goes to the queue first (start()).
            runTurn: (msg) => this.agent.loop.queueTurn(msg),
            // In the queue now: the local journal's entry is done with.
            admitted: (msg) => {
              if (msg.journalId !== undefined) this.journal.markDone(msg.journalId);
            },
            repliesSent: (msg, withinMs) => this.channels.sentTo(msg.channel, msg.chatId, withinMs),
            log: this.log,
          })
        : undefined;
    this.cluster = cluster?.node;
    this.clusterServices = cluster?.services ?? {};
    this.pairing = new PairingGate({
      store: cluster?.pairing ?? new PairingStore(pairingPath(stateDir(path))),
      config: () => this.opts.loaded.config,
      publish: (msg) => this.bus.publishOutbound(msg),
    });
    this.agent = createAgent({
      config,
      workspace,
      bus: this.bus,
      cronStorePath: cronStorePath(path),
      ...(cluster ? { shared: cluster.shared } : {}),
      configPath: path,
      // Live: a SIGHUP that takes someone out of allowFrom, or a pairing revoked, stops their cron
      // jobs and the message tool's access.
      allowFromOf: (channel) => {
        const listed = allowFromOf(this.opts.loaded.config, channel);
        return listed && [...listed, ...this.pairing.approvedIds(channel)];
      },
      pairing: this.pairing,
      statusLines: () => [
        ...heldStatusLines(this.channels.heldCounts()),
        ...(this.cluster?.statusLines() ?? []),
      ],
      // Live too: who may answer approvals follows the reloaded config.
      adminsOf: (channel) => adminsOf(this.opts.loaded.config, channel),
      approvalMeter: this.metrics,
      provider: this.metrics.meter(llm),
      onUsage: (entry) => this.metrics.usage(entry),
      currentConfig: () => this.opts.loaded.config,
      toolJournal: this.cluster?.toolJournal ?? this.toolJournal,
      onHandled: (msg, report) => {
        this.metrics.turn(report);
        const id = msg.journalId;
        if (id === undefined) return;
        // A queued turn of the cluster (its id is the inbound row's); else a message of the local journal.
        if (this.cluster?.turns.handled(msg)) {
          void this.cluster.toolJournal.endTurn(id);
          return;
        }
        this.journal.markDone(id);
        // After markDone: a crash in between leaves records the next open drops, never a done-less replay without them.
        this.toolJournal.endTurn(id);
      },
      onTurnStart: (msg) => {
        if (msg.journalId !== undefined) this.journal.markStarted(msg.journalId);
      },
    });
    this.bus.onInbound((msg) => this.metrics.inbound(msg));
    this.channels = new ChannelManager({
      bus: this.bus,
      sendProgress: config.channels.sendProgress,
      sendToolHints: config.channels.sendToolHints,
      streaming: config.channels.streaming,
      journal: this.journal,
      meter: this.metrics,
      questions: this.agent.questions,
      access: this.pairing,
      ...(this.cluster
        ? { sentOnce: this.cluster.replies, stored: (msg) => this.cluster!.turns.stored(msg) }
        : {}),
      ...(opts.channelRetryBaseMs ? { retryBaseMs: opts.channelRetryBaseMs } : {}),
    });
    this.heartbeat = new HeartbeatService({
      workspace,
      provider: this.agent.provider,
      bus: this.bus,
      enabled: config.gateway.heartbeat.enabled,
      intervalSeconds: config.gateway.heartbeat.intervalSeconds,
      promptFileMaxChars: config.agents.defaults.promptFileMaxChars,
      lastActiveChat: () => this.agent.loop.lastActiveChat,
      paused: () => this.agent.budget.pausedReason("heartbeat"),
    });
    this.health = new HealthServer({
      host: config.gateway.host,
      port: config.gateway.port,
      metrics: this.metrics,
      readiness: () =>
        evaluateReadiness({
          channels: this.channels.status(),
          llm: {
            lastSuccessAt: this.metrics.lastLlmSuccessAt,
            lastFailureAt: this.metrics.lastLlmFailureAt,
            ...(llm instanceof ResilientProvider ? { circuits: llm.circuitStates() } : {}),
          },
          journal: this.journal.health,
          starting: !this.running,
          ...(this.cluster ? { database: this.cluster.health } : {}),
        }),
    });
  }

  /** Starts everything; a stop() while it runs makes it return early, started or not. */
  start(): Promise<void> {
    this.starting = this.startSteps(this.stopping.signal);
    return this.starting;
  }

  private async startSteps(stopped: AbortSignal): Promise<void> {
    const { config, workspace, path } = this.opts.loaded;
    // First: a second gateway on this state folder or workspace must stop before it touches the
    // journal or a session file (exit 78).
    this.lock(StateLock.acquire(stateDir(path), this.log, "state"));
    // A cluster's instances share the workspace by design (docs/cluster.md); one process owns it alone.
    if (!this.cluster) this.lock(StateLock.acquire(sessionsDirOf(workspace), this.log, "workspace"));
    createWorkspace(workspace);
    // The database before anything reads shared state: a cluster it cannot join stops the start here.
    await this.cluster?.open();
    // The enabled platforms' SDKs load (one after another) while the sandbox probe runs bwrap (tens
    // of ms with this thread idle) and the rest starts; each channel connects as soon as its own SDK
    // is in, while the next one loads. Building an adapter touches nothing outside the process, and a
    // failed "require" (exit 78) is thrown before anything connects.
    const creating = creatingEnabledChannels(
      { config, workspace, log: this.log, gateway: this.services() },
      this.opts.platforms ?? PLATFORMS,
    );
    await this.checkExecSandbox();
    await this.health.start();
    if (stopped.aborted) return;
    const unfinished = this.journal.open();
    // Taken now: a preview of this run (a message answered while channels start) is not a leftover.
    const cutOffPreviews = this.journal.openPreviews();
    this.toolJournal.open(unfinished.inbound.map((p) => p.id));
    if (this.cluster) {
      // What the bus carries goes through the cluster first (its queue, or /stop to the instance running the turn).
      this.agent.loop.start({ fromBus: false });
      await this.cluster.takeIntake(this.bus, this.agent.loop);
    } else {
      this.agent.loop.start();
    }
    await this.channels.start(); // routes from now on; each channel joins below once built
    const joined = await Promise.all(
      creating.map(async (created) => {
        const enabled = await created;
        if (!enabled || stopped.aborted) return false;
        await this.channels.join(enabled.channel, enabled.options);
        return true;
      }),
    );
    if (!joined.includes(true) && !stopped.aborted) {
      // Enabled but refused (config problems, a failing adapter) is said above; "enable one" would mislead.
      const refused = (Object.keys(PLATFORMS) as PlatformName[]).some(
        (name) => config.channels[name].enabled,
      );
      this.log.warn(
        refused
          ? "no channels are running: the enabled ones could not be started (the errors above say why); " +
              "fix the config and reload (SIGHUP); cron and heartbeat still run"
          : "no channels are running: enable one in the config (channels.telegram.enabled, ...) " +
              "or use `palaver chat` to talk in the terminal; cron and heartbeat still run",
      );
    }
    if (stopped.aborted) return; // stopped while connecting: nothing is replayed or scheduled
    // Prompts the last run left open: their turns died with it, so they say "expired" (channels route now).
    this.agent.questions.expireLeftovers();
    // Previews a crash cut off mid-stream: marked interrupted (their answers come again below).
    this.channels.interruptPreviews(cutOffPreviews);
    this.channels.resend(unfinished.outbound);
    // Welcomes for people approved while palaver was down, and from now on for each approval.
    void this.pairing.start();
    // What an earlier run took in but never finished, oldest first. Only now: a reply published
    // before the manager routes (channels.start) would reach no channel and be lost.
    for (const { id, msg } of unfinished.inbound) {
      this.bus.publishInbound({ ...msg, journalId: id });
    }
    if (unfinished.inbound.length)
      this.log.info({ count: unfinished.inbound.length }, "replaying unfinished messages");
    // The cluster's queued turns too run only now that their replies can be routed.
    await this.cluster?.work(this.health.port ?? null);
    // Background work too starts only once replies can be routed: a reminder due at startup must reach its chat.
    if (config.cron.enabled) await this.agent.cron.start();
    this.heartbeat.start();
    this.running = true;
    this.log.info(
      { workspace, model: this.agent.provider.model, channels: this.channels.status() },
      "gateway running",
    );
  }

  /** What a channel served from this process (the web chat) may use. */
  private services(): GatewayServices {
    return {
      http: this.health,
      sessions: this.agent.sessions,
      stateDir: stateDir(this.opts.loaded.path),
      model: this.agent.provider.model,
      usageReport: (asker, session) => this.agent.usageReport(asker, session),
      ...this.clusterServices,
    };
  }

  /** Says whether shell commands are confined; on tools.exec.sandbox "require" without a working bwrap, throws (exit 78). */
  private async checkExecSandbox(): Promise<void> {
    const state = await this.agent.execSandbox.state();
    const line = `exec: ${describeSandbox(state)}`;
    if (state.sandboxed || state.mode === "off") this.log.info({ sandbox: state }, line);
    else this.log.warn({ sandbox: state }, line);
  }

  /**
   * Applies a new config (SIGHUP): a chat platform whose section changed is
   * restarted (or started, or stopped); the others keep running untouched.
   * The budget and the prices apply at once (they are read per decision and per LLM call). Other
   * changes need a restart, and the log says which.
   */
  async reload(next: Pick<LoadedConfig, "config">): Promise<void> {
    const before = this.opts.loaded.config;
    const after = next.config;
    const changedPlatforms = (Object.keys(PLATFORMS) as PlatformName[]).filter(
      (name) => JSON.stringify(before.channels[name]) !== JSON.stringify(after.channels[name]),
    );
    const platforms = this.opts.platforms ?? PLATFORMS;
    for (const name of changedPlatforms) {
      await this.channels.remove(name);
      const [created] = await createEnabledChannels(
        { config: after, workspace: this.opts.loaded.workspace, log: this.log, gateway: this.services() },
        { [name]: platforms[name] },
      );
      // Replies kept for it while it was off go out as soon as it runs (the manager holds them).
      if (created) await this.channels.replace(created.channel, created.options);
      this.log.info({ channel: name, enabled: Boolean(created) }, "channel reloaded");
    }
    const liveSections = new Set(["channels", "budget", "pricing"]);
    const needRestart = Object.keys(after).filter(
      (key) =>
        !liveSections.has(key) &&
        JSON.stringify(before[key as keyof Config]) !== JSON.stringify(after[key as keyof Config]),
    );
    if (needRestart.length) {
      this.log.warn({ sections: needRestart }, "these config changes take effect after a restart");
    }
    this.opts.loaded = {
      ...this.opts.loaded,
      config: { ...before, channels: after.channels, budget: after.budget, pricing: after.pricing },
    };
  }

  /** Graceful stop: no new messages, running turns finish (up to graceMs), everything persisted. */
  async stop(graceMs: number): Promise<void> {
    // A start still under way: abort its connects and let it return before stopping what it started.
    this.stopping.abort();
    if (!this.running) this.channels.abortStarts();
    await this.starting?.catch(() => undefined);
    this.channels.closeIntake();
    this.pairing.stop();
    this.heartbeat.stop();
    await this.cluster?.stopWorking();
    await this.agent.shutdown(graceMs);
    // Last replies get a moment to go out; what cannot, stays in the journal for the next start.
    await this.channels.stop(Math.min(Math.max(graceMs, 1000), 5000));
    this.journal.close();
    this.toolJournal.close();
    await this.cluster?.close();
    await this.health.stop();
    for (const lock of this.locks) lock.release();
  }

  private lock(taken: StateLock | null): void {
    if (taken) this.locks.push(taken);
  }
}
