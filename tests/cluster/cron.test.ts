/**
 * Cron in the cluster: three CronService objects, each on its own pool over one database, are
 * three instances. They share one clock (the service's injectable one) and look at it every few
 * milliseconds (maxTimerMs), so moving it makes a run due on all three at once.
 *
 * The race the claim exists for is made certain, not left to timing: a gate holds each
 * instance's first update that finds a run due until all three have found it, so all three
 * decide on the same rows (without the claim, each would fire the run).
 */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { InboundMessage } from "../../src/bus/types.js";
import { PgCronStore } from "../../src/cron/pg-store.js";
import { CronService, type AddJobInput } from "../../src/cron/service.js";
import type { CronJobStore, StoreSnapshot, UpdateResult } from "../../src/cron/store-types.js";
import { CronJobSchema, type CronJob } from "../../src/cron/types.js";
import { type Database } from "../../src/db/pool.js";
import { silentLog } from "../cron/helpers.js";
import { createGate, type Gate } from "../helpers/gate.js";
import { postgresMissing, usePostgres } from "../helpers/postgres.js";
import { requireOrSkip } from "../helpers/requires.js";
import { waitFor } from "../helpers/wait.js";

const log = silentLog();
const missing = requireOrSkip(postgresMissing());

const START = Date.parse("2026-03-02T08:00:00Z");
const MIN = 60_000;
const INSTANCES = 3;
/** Only ends a gate nobody else reaches (a broken build); the assertions then say what went wrong. */
const GATE_LIMIT_MS = 30_000;

/** Holds each instance's first update that finds a run due until every instance has found one. */
class DueGate {
  private gate: Gate | undefined;
  private readonly arrived = new Set<string>();

  /** From now on, the next update of each instance that finds a run due waits for the others. */
  arm(): void {
    this.gate = createGate();
    this.arrived.clear();
  }

  get isOpen(): boolean {
    return this.gate?.isOpen ?? false;
  }

  async pass(instance: string, snapshot: StoreSnapshot, now: number): Promise<void> {
    const gate = this.gate;
    if (!gate || gate.isOpen || this.arrived.has(instance)) return;
    if (!snapshot.jobs.some((j) => j.enabled && j.state.nextRunAtMs != null && j.state.nextRunAtMs <= now))
      return;
    this.arrived.add(instance);
    if (this.arrived.size >= INSTANCES) gate.open();
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([gate.opened, new Promise((r) => (timer = setTimeout(r, GATE_LIMIT_MS)))]);
    clearTimeout(timer);
  }
}

/** The real PgCronStore, with the gate in front of its updates. */
class GatedStore implements CronJobStore {
  constructor(
    private readonly inner: PgCronStore,
    private readonly instance: string,
    private readonly gate: DueGate,
    private readonly now: () => number,
  ) {}

  read(): Promise<StoreSnapshot> {
    return this.inner.read();
  }

  signature(): Promise<string | null> {
    return this.inner.signature();
  }

  claim(jobId: string, dueAtMs: number): Promise<boolean> {
    return this.inner.claim(jobId, dueAtMs);
  }

  update<T>(change: (snapshot: StoreSnapshot) => T | Promise<T>): Promise<UpdateResult<T>> {
    return this.inner.update(async (snapshot) => {
      await this.gate.pass(this.instance, snapshot, this.now());
      return change(snapshot);
    });
  }
}

interface Instance {
  name: string;
  service: CronService;
  published: InboundMessage[];
}

describe.skipIf(missing)("cron in the cluster (real PostgreSQL)", () => {
  const postgres = usePostgres();
  let url: string;
  let clock: number;
  const now = (): number => clock;
  const services: CronService[] = [];
  let gate: DueGate;

  const pool = (): Database => postgres.open(url);

  /** The three instances' schedulers, not started. */
  function instances(opts: { maxCatchUp?: number; dbs?: Database[] } = {}): Instance[] {
    return Array.from({ length: INSTANCES }, (_, i) => {
      const name = `instance-${i + 1}`;
      const db = opts.dbs?.[i] ?? pool();
      const store = new GatedStore(new PgCronStore({ db, instance: name, log }), name, gate, now);
      const published: InboundMessage[] = [];
      const service = new CronService({
        store,
        bus: { publishInbound: (msg) => published.push(msg) },
        maxCatchUp: opts.maxCatchUp ?? 5,
        log,
        now,
        pollIntervalMs: 20,
        maxTimerMs: 20,
      });
      services.push(service);
      return { name, service, published };
    });
  }

  async function startAll(cluster: Instance[]): Promise<void> {
    await Promise.all(cluster.map((i) => i.service.start()));
  }

  /** Moves the shared clock and waits until every instance has decided about what is due then. */
  async function moveClockTo(at: number, cluster: Instance[]): Promise<void> {
    gate.arm();
    clock = at;
    await waitFor(() => gate.isOpen, undefined, "every instance found the run due");
    await Promise.all(cluster.map((i) => i.service.idle()));
  }

  const firesOf = (cluster: Instance[], id: string): InboundMessage[] =>
    cluster.flatMap((i) => i.published.filter((m) => m.metadata?.cronJobId === id));

  async function firedSlots(db: Database, id: string): Promise<number[]> {
    const { rows } = await db.query<{ ms: string }>(
      "SELECT (extract(epoch FROM due_at) * 1000)::bigint::text AS ms FROM palaver.cron_fired WHERE job_id = $1 ORDER BY due_at",
      [id],
    );
    return rows.map((r) => Number(r.ms));
  }

  async function stored(db: Database, id: string): Promise<CronJob | undefined> {
    const { rows } = await db.query<{ job: CronJob }>("SELECT job FROM palaver.cron_jobs WHERE id = $1", [
      id,
    ]);
    return rows[0]?.job;
  }

  const job = (extra: Partial<AddJobInput>): AddJobInput => ({
    message: "stand-up",
    schedule: { kind: "every", everyMs: 10 * MIN },
    channel: "slack",
    to: "C1",
    ...extra,
  });

  beforeEach(async () => {
    url = (await postgres.migratedDatabase()).url;
    clock = START;
    gate = new DueGate();
  });
  afterEach(async () => {
    await Promise.all(services.splice(0).map((s) => s.stop()));
  });

  it("fires each run of a recurring job once, on one of the three instances", async () => {
    const cluster = instances();
    await startAll(cluster);
    const added = await cluster[0]!.service.add(job({ schedule: { kind: "every", everyMs: 10 * MIN } }));

    const slots = [1, 2, 3, 4].map((k) => START + k * 10 * MIN);
    for (const slot of slots) await moveClockTo(slot, cluster);

    expect(firesOf(cluster, added.id)).toHaveLength(slots.length);
    const admin = pool();
    expect(await firedSlots(admin, added.id)).toEqual(slots);
    const state = (await stored(admin, added.id))!.state;
    expect(state).toMatchObject({
      lastRunAtMs: slots.at(-1),
      lastStatus: "ok",
      nextRunAtMs: START + 50 * MIN,
    });
  });

  it("fires a job added through one instance once in the cluster", async () => {
    const cluster = instances();
    await startAll(cluster);
    const added = await cluster[1]!.service.add(
      job({ message: "call the bank", schedule: { kind: "at", atMs: START + 5 * MIN } }),
    );

    // Every instance's scheduler has it: each one finds it due (the gate opens only then).
    await moveClockTo(START + 5 * MIN, cluster);

    const fires = firesOf(cluster, added.id);
    expect(fires).toHaveLength(1);
    expect(fires[0]!.content).toContain("call the bank");
    const admin = pool();
    expect(await firedSlots(admin, added.id)).toEqual([START + 5 * MIN]);
    // A one-shot job removes itself as it fires.
    expect(await stored(admin, added.id)).toBeUndefined();
  });

  it("stops firing a job on every instance once it is removed on one", async () => {
    const cluster = instances();
    await startAll(cluster);
    const removed = await cluster[0]!.service.add(job({ schedule: { kind: "every", everyMs: 10 * MIN } }));
    await moveClockTo(START + 10 * MIN, cluster);
    expect(firesOf(cluster, removed.id)).toHaveLength(1);

    expect(await cluster[2]!.service.remove(removed.id)).toBe(true);
    // Added after the removal: all three firing it proves they have looked at the jobs since.
    const later = await cluster[1]!.service.add(
      job({ message: "later", schedule: { kind: "at", atMs: START + 30 * MIN } }),
    );
    // Two of the removed job's runs (20 and 30 minutes) have passed by then.
    await moveClockTo(START + 30 * MIN, cluster);

    expect(firesOf(cluster, later.id)).toHaveLength(1);
    expect(firesOf(cluster, removed.id)).toHaveLength(1);
    const admin = pool();
    expect(await firedSlots(admin, removed.id)).toEqual([START + 10 * MIN]);
    expect(await stored(admin, removed.id)).toBeUndefined();
  });

  it("catches up once after all three were stopped: maxCatchUp runs fire, the rest are recorded as skipped", async () => {
    const dbs = [pool(), pool(), pool()];
    const before = instances({ dbs });
    await startAll(before);
    const first = await before[0]!.service.add(
      job({ message: "first", schedule: { kind: "every", everyMs: 10 * MIN } }),
    );
    const second = await before[1]!.service.add(
      job({ message: "second", schedule: { kind: "every", everyMs: 20 * MIN } }),
    );
    const third = await before[2]!.service.add(
      job({ message: "third", schedule: { kind: "every", everyMs: 30 * MIN } }),
    );
    await Promise.all(before.map((i) => i.service.stop()));

    // Down for a day; then all three start at once.
    clock = START + 24 * 60 * MIN;
    const after = instances({ dbs, maxCatchUp: 2 });
    gate.arm();
    await startAll(after);
    expect(gate.isOpen).toBe(true);

    const fires = [first, second, third].map((j) => firesOf(after, j.id));
    expect(fires.map((f) => f.length)).toEqual([1, 1, 0]);
    for (const [fire] of fires.slice(0, 2)) expect(fire!.content).toContain("palaver was not running");
    const admin = pool();
    expect(await firedSlots(admin, first.id)).toEqual([START + 10 * MIN]);
    expect(await firedSlots(admin, second.id)).toEqual([START + 20 * MIN]);
    expect(await firedSlots(admin, third.id)).toEqual([]);
    const skipped = (await stored(admin, third.id))!.state;
    expect(skipped.lastStatus).toBe("skipped");
    expect(skipped.lastError).toMatch(/^missed at .* while palaver was not running$/);
    expect(skipped.nextRunAtMs).toBe(clock + 30 * MIN);
    expect(firesOf(before, first.id)).toHaveLength(0);
  });

  it("moves a job on when the instance that claimed its run stopped before recording it, and fires its next run", async () => {
    const cluster = instances();
    await startAll(cluster);
    const added = await cluster[0]!.service.add(job({ schedule: { kind: "every", everyMs: 10 * MIN } }));
    const slot = START + 10 * MIN;
    // An instance claimed the run and died before it recorded it: the row says "due at slot" still.
    const admin = pool();
    await admin.query(
      `INSERT INTO palaver.cron_fired (job_id, due_at, fired_by)
       VALUES ($1, to_timestamp($2::double precision / 1000), 'instance-gone')`,
      [added.id, slot],
    );
    await moveClockTo(slot, cluster);
    expect(firesOf(cluster, added.id)).toHaveLength(0);
    expect((await stored(admin, added.id))!.state.nextRunAtMs).toBe(slot);

    // Long after: the claim has settled; the schedule moves on without firing that run again.
    const settled = slot + 2 * MIN;
    await moveClockTo(settled, cluster);
    expect(firesOf(cluster, added.id)).toHaveLength(0);
    expect((await stored(admin, added.id))!.state.nextRunAtMs).toBe(settled + 10 * MIN);

    await moveClockTo(settled + 10 * MIN, cluster);
    expect(firesOf(cluster, added.id)).toHaveLength(1);
    expect(await firedSlots(admin, added.id)).toEqual([slot, settled + 10 * MIN]);
  });

  it("skips a row that is not a valid job and leaves it as it is", async () => {
    const admin = pool();
    const bad = { id: "bad00001", schedule: { kind: "every" }, payload: { message: "hand-made" } };
    await admin.query("INSERT INTO palaver.cron_jobs (id, job) VALUES ($1, $2)", [bad.id, bad]);
    const store = new PgCronStore({ db: pool(), instance: "instance-1", log });
    const cluster = instances();
    await startAll(cluster);
    const added = await cluster[0]!.service.add(job({}));
    await moveClockTo(START + 10 * MIN, cluster);

    expect(firesOf(cluster, added.id)).toHaveLength(1);
    const snapshot = await store.read();
    expect(snapshot.jobs.map((j) => j.id)).toEqual([added.id]);
    expect(snapshot.invalid).toEqual([bad]);
    expect(await stored(admin, bad.id)).toEqual(bad);
  });

  it("keeps both instances' changes to different jobs made at once, and redoes one of two changes to the same job", async () => {
    const [a, b] = [pool(), pool()].map(
      (db, i) => new PgCronStore({ db, instance: `instance-${i + 1}`, log }),
    );
    const seed = (id: string) =>
      CronJobSchema.parse({ id, name: "0", schedule: { kind: "every", everyMs: 10 * MIN } });
    await a!.update((snap) => snap.jobs.push(seed("aaaa0001"), seed("bbbb0002")));
    /** Both changes start from the rows as they were before either wrote. */
    const bothRead = () => {
      let arrived = 0;
      const gate = createGate();
      return async () => {
        if (++arrived === 2) gate.open();
        await gate.opened;
      };
    };
    const bump = (snap: StoreSnapshot, id: string) => {
      const job = snap.jobs.find((j) => j.id === id)!;
      job.name = String(Number(job.name) + 1);
    };

    const different = bothRead();
    await Promise.all([
      a!.update(async (snap) => {
        await different();
        bump(snap, "aaaa0001");
      }),
      b!.update(async (snap) => {
        await different();
        bump(snap, "bbbb0002");
      }),
    ]);
    const same = bothRead();
    const attempts = { a: 0, b: 0 };
    await Promise.all([
      a!.update(async (snap) => {
        attempts.a++;
        await same();
        bump(snap, "aaaa0001");
      }),
      b!.update(async (snap) => {
        attempts.b++;
        await same();
        bump(snap, "aaaa0001");
      }),
    ]);

    const names = Object.fromEntries((await a!.read()).jobs.map((j) => [j.id, j.name]));
    expect(names).toEqual({ aaaa0001: "3", bbbb0002: "1" });
    expect([attempts.a, attempts.b].sort()).toEqual([1, 2]);
  });
});
