/**
 * This process as one instance of a cluster (cluster.database set): its id, the database, the
 * turn queue and the record of sent replies. The gateway opens it before anything else touches
 * shared state, starts its work once replies can be routed, and closes it last.
 */
import { randomBytes } from "node:crypto";
import { hostname } from "node:os";
import type { AgentLoop } from "../agent/loop.js";
import type { MessageBus } from "../bus/bus.js";
import { parseCommand } from "../bus/commands.js";
import { SYSTEM_CHANNEL, type InboundMessage } from "../bus/types.js";
import { withClusterLock } from "../db/advisory.js";
import { PgDocuments } from "../db/documents.js";
import { Notifier } from "../db/notify.js";
import { PgSessionStore } from "../sessions/pg-store.js";
import { InstanceRegistry } from "../db/instances.js";
import { Lease } from "../db/lease.js";
import { checkWorkspaceMarker, type WorkspaceCheck } from "../db/workspace-marker.js";
import { migrate } from "../db/schema.js";
import { openDatabase, shownUrl, type Database } from "../db/pool.js";
import type { Logger } from "../log.js";
import type { ClusterCounts } from "../daemon/metrics.js";
import { PalaverError, errorMessage } from "../util/errors.js";
import { PgCronStore } from "../cron/pg-store.js";
import { PgToolJournal } from "../daemon/pg-tool-journal.js";
import { ClusterReplies } from "./replies.js";
import { StopRelay } from "./stop-relay.js";
import { ClusterTurns } from "./turns.js";
import { LEASES } from "../db/names.js";
import { clusterStatusLines } from "./status-lines.js";
import { readClusterView, type ClusterView } from "./view.js";

/** How often the gateway reads the cluster's view for /status, /metrics and /readyz. */
const VIEW_EVERY_MS = 5000;

export interface ClusterNodeOptions {
  url: string;
  /** The workspace every instance must share (checked against the cluster's marker at open). */
  workspace: string;
  /** palaver's version, shown to the other instances. */
  version: string;
  turnTimeoutSeconds: number;
  concurrency: number;
  /** Runs a queued turn in this instance's loop (AgentLoop.queueTurn). */
  runTurn: (msg: InboundMessage) => void;
  /** This instance is done with the message's local journal entry (stored in the queue, or /stop passed on). */
  admitted: (msg: InboundMessage) => void;
  /** Resolves once the turn's replies to `msg`'s chat went out here, at most withinMs (ClusterTurnsOptions). */
  repliesSent: (msg: InboundMessage, withinMs: number) => Promise<void>;
  log: Logger;
}

/** `<host>-<pid>-<4 hex>`: readable in `palaver status`, unique across restarts. */
export function newInstanceId(): string {
  return `${hostname()}-${process.pid}-${randomBytes(2).toString("hex")}`;
}

export class ClusterNode {
  readonly instance = newInstanceId();
  readonly db: Database;
  readonly turns: ClusterTurns;
  readonly replies: ClusterReplies;
  /** The tool journal in the database: a turn run again on another instance reuses its calls. */
  readonly toolJournal: PgToolJournal;
  /** Cron jobs in the database: each due run fires once in the cluster. */
  readonly cronStore: PgCronStore;
  /** Sessions in the database: a conversation's turn may run on any instance. */
  readonly sessions: PgSessionStore;
  /** The small shared documents (pairing, approval rules, open questions), kept current by LISTEN/NOTIFY. */
  readonly documents: PgDocuments;
  /** LISTEN/NOTIFY for whoever needs it (the web chat's events). */
  readonly notifier: Notifier;
  /** Work on MEMORY.md and HISTORY.md (consolidation), one instance at a time. */
  readonly memoryLock = <T>(work: () => Promise<T>): Promise<T> => withClusterLock(this.db, "memory", work);
  /** Whether this instance sees the cluster's workspace (set by open()). */
  workspace: WorkspaceCheck | undefined;
  private registry: InstanceRegistry | undefined;
  private view: ClusterView | undefined;
  private viewError: { error: string; since: string } | undefined;
  private viewTimer: NodeJS.Timeout | undefined;
  private reading: Promise<void> | undefined;

  constructor(private readonly opts: ClusterNodeOptions) {
    this.db = openDatabase({ url: opts.url, applicationName: `palaver ${this.instance}`, log: opts.log });
    this.turns = new ClusterTurns({
      url: opts.url,
      db: this.db,
      instance: this.instance,
      log: opts.log,
      turnTimeoutSeconds: opts.turnTimeoutSeconds,
      concurrency: opts.concurrency,
      runTurn: opts.runTurn,
      admitted: opts.admitted,
      repliesSent: opts.repliesSent,
    });
    this.replies = new ClusterReplies(this.db, this.instance);
    this.toolJournal = new PgToolJournal({ db: this.db, log: opts.log });
    this.cronStore = new PgCronStore({ db: this.db, instance: this.instance, log: opts.log });
    this.sessions = new PgSessionStore(this.db, opts.log);
    this.documents = new PgDocuments({ db: this.db, log: opts.log });
    this.notifier = new Notifier({ url: opts.url, instance: this.instance, log: opts.log });
  }

  /** Migrates the schema (once in the cluster) and opens the queue; a database it cannot use stops the start. */
  async open(): Promise<void> {
    try {
      await migrate(this.db, this.opts.log);
      this.workspace = await checkWorkspaceMarker(this.db, this.opts.workspace, this.opts.log);
      await this.documents.start(this.notifier);
      await this.turns.start();
    } catch (err) {
      if (err instanceof PalaverError) throw err;
      throw new PalaverError(
        `cluster.database (${shownUrl(this.opts.url)}): ${errorMessage(err)}. Check that PostgreSQL runs ` +
          "there and the URL's user, password and database are right (`palaver doctor` tries it)",
        { cause: err },
      );
    }
    this.opts.log.info({ instance: this.instance, database: shownUrl(this.opts.url) }, "cluster: joined");
  }

  /**
   * Takes the bus's messages in the loop's place: /stop goes to the instance running the chat's turn
   * (stop-relay.ts), what the loop answers at once (an answer to its question, /status while one
   * waits) is answered here, and everything else goes into the cluster's queue.
   */
  async takeIntake(bus: MessageBus, loop: AgentLoop): Promise<void> {
    const stops = new StopRelay({
      db: this.db,
      notifier: this.notifier,
      log: this.opts.log,
      runsHere: (key) => loop.runsTurnOf(key),
      stopHere: (msg) => void loop.answerNow(msg),
      passedOn: this.opts.admitted,
    });
    await stops.start();
    bus.onInbound((msg) => {
      if (msg.channel !== SYSTEM_CHANNEL && parseCommand(msg.content)?.name === "stop") void stops.stop(msg);
      else if (!loop.answerNow(msg)) void this.turns.enqueue(msg);
    });
  }

  /** A new lease (not yet started) for a platform's single ingress: its channel starts and stops it. */
  lease(name: string): Lease {
    return new Lease({ url: this.opts.url, name, instance: this.instance, log: this.opts.log });
  }

  /**
   * Joins the instances the others see (`port`: this one's HTTP port), starts running queued turns
   * here, and reads the cluster's view every few seconds.
   */
  async work(port: number | null): Promise<void> {
    this.registry = new InstanceRegistry({
      db: this.db,
      instance: { id: this.instance, host: hostname(), pid: process.pid, version: this.opts.version, port },
      log: this.opts.log,
    });
    await this.registry.register();
    await this.turns.work();
    await this.readView();
    this.viewTimer = setInterval(() => void this.readView(), VIEW_EVERY_MS);
    this.viewTimer.unref();
  }

  /** The cluster as last read: /status's lines. */
  statusLines(): string[] {
    if (this.viewError) return [`Cluster: the database does not answer (${this.viewError.error})`];
    return this.view ? clusterStatusLines(this.view, this.instance).map((line) => `Cluster ${line}`) : [];
  }

  /** /metrics' figures, from the last read. */
  counts(): ClusterCounts | undefined {
    const view = this.view;
    if (!view) return undefined;
    return {
      instances: view.instances.length,
      queued: view.turns.queued,
      running: view.turns.running,
      blocked: view.turns.blocked.length,
      leases: Object.fromEntries(LEASES.map((lease) => [lease, view.leases[lease] === this.instance])),
    };
  }

  /** /readyz's database component: whether the last read of the view succeeded. */
  get health(): { ready: boolean; error?: string; since?: string } {
    return this.viewError ? { ready: false, ...this.viewError } : { ready: true };
  }

  private readView(): Promise<void> {
    this.reading ??= readClusterView(this.db, () => this.turns.blockedKeys())
      .then((view) => {
        this.view = view;
        if (this.viewError) this.opts.log.info("cluster: the database answers again");
        this.viewError = undefined;
      })
      .catch((err: unknown) => {
        if (!this.viewError)
          this.opts.log.warn({ err: errorMessage(err) }, "cluster: the database does not answer");
        this.viewError ??= { error: errorMessage(err), since: new Date().toISOString() };
      })
      .finally(() => (this.reading = undefined));
    return this.reading;
  }

  /** Stops taking new turns (before the loop's shutdown). */
  stopWorking(): Promise<void> {
    return this.turns.stopWorking();
  }

  /** Gives back turns still running here, stops the queue and closes the database. */
  async close(): Promise<void> {
    clearInterval(this.viewTimer);
    await this.reading;
    await this.registry
      ?.stop()
      .catch((err: unknown) => this.opts.log.warn({ err }, "cluster: could not mark this instance stopped"));
    await this.turns
      .stop()
      .catch((err: unknown) => this.opts.log.warn({ err }, "cluster: queue stop failed"));
    this.documents.stop();
    await this.notifier.close().catch(() => undefined);
    await this.db.end().catch(() => undefined);
  }
}
