/** LeasedIngress: the ingress runs exactly while the lease is held, whatever the order of events. */
import { describe, expect, it } from "vitest";
import { LeasedIngress, type IngressLease } from "../../src/channels/ingress-lease.js";
import { logger } from "../../src/log.js";
import { waitFor } from "../helpers/wait.js";

/** A lease the test gives and takes away by hand (the real one, on PostgreSQL, is in tests/cluster/). */
class HandLease implements IngressLease {
  held = false;
  started = 0;
  private readonly acquired: (() => void)[] = [];
  private readonly lost: (() => void)[] = [];
  start(): void {
    this.started++;
  }
  async stop(): Promise<void> {
    if (this.held) this.lose();
    return Promise.resolve();
  }
  onAcquired(listener: () => void): void {
    this.acquired.push(listener);
  }
  onLost(listener: () => void): void {
    this.lost.push(listener);
  }
  take(): void {
    this.held = true;
    for (const l of this.acquired) l();
  }
  lose(): void {
    this.held = false;
    for (const l of this.lost) l();
  }
}

const log = logger("test");

function ingress(begin: (signal: AbortSignal) => Promise<void>) {
  const lease = new HandLease();
  const events: string[] = [];
  const leased = new LeasedIngress({
    lease,
    what: "test ingress",
    begin: async (signal) => {
      events.push("begin");
      await begin(signal);
    },
    end: () => {
      events.push("end");
      return Promise.resolve();
    },
    log,
    retryBaseMs: 10,
    retryMaxMs: 20,
  });
  return { lease, leased, events };
}

describe("LeasedIngress", () => {
  it("starts the ingress when the lease is taken and ends it when it is lost or given up", async () => {
    const { lease, leased, events } = ingress(() => Promise.resolve());
    leased.start();
    expect(lease.started).toBe(1);
    expect(leased.active).toBe(false);
    lease.take();
    await waitFor(() => leased.active, undefined, "running");
    lease.lose();
    await waitFor(() => !leased.active && events.length === 2, undefined, "ended");
    lease.take();
    await waitFor(() => leased.active, undefined, "running again");
    await leased.stop();
    expect(leased.active).toBe(false);
    expect(events).toEqual(["begin", "end", "begin", "end"]);
  });

  it("a lease lost while the ingress still starts aborts the start and ends it", async () => {
    const { lease, leased, events } = ingress(
      (signal) =>
        new Promise<void>((_, reject) =>
          signal.addEventListener("abort", () => reject(new Error("start cancelled"))),
        ),
    );
    leased.start();
    lease.take();
    await waitFor(() => events.includes("begin"), undefined, "starting");
    lease.lose();
    await waitFor(() => events.includes("end"), undefined, "ended");
    await leased.stop();
    expect(leased.active).toBe(false);
    expect(events).toEqual(["begin", "end"]);
  });

  it("a start that fails is retried while the lease is held, and no more once it is lost", async () => {
    let fails = 2;
    const { lease, leased, events } = ingress(() =>
      fails-- > 0 ? Promise.reject(new Error("network down")) : Promise.resolve(),
    );
    leased.start();
    lease.take();
    await waitFor(() => leased.active, undefined, "running after two failures");
    expect(events).toEqual(["begin", "end", "begin", "end", "begin"]);

    fails = 1_000_000;
    lease.lose();
    await waitFor(() => !leased.active, undefined, "ended");
    lease.take();
    await waitFor(() => events.filter((e) => e === "begin").length >= 5, undefined, "retrying");
    lease.lose();
    await leased.stop();
    const settled = events.length;
    // Started again and the lease taken again: it runs, and nothing ran in between.
    fails = 0;
    leased.start();
    lease.take();
    await waitFor(() => leased.active, undefined, "running once more");
    expect(events.slice(settled)).toEqual(["begin"]);
  });
});
