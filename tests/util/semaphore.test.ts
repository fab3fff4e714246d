import { describe, expect, it } from "vitest";
import { Semaphore } from "../../src/util/semaphore.js";

describe("Semaphore", () => {
  it("admits at most `limit` holders and serves waiters in order", async () => {
    const sem = new Semaphore(2);
    const r1 = await sem.acquire();
    const r2 = await sem.acquire();
    const order: number[] = [];
    const w3 = sem.acquire().then((r) => (order.push(3), r));
    const w4 = sem.acquire().then((r) => (order.push(4), r));
    await Promise.resolve();
    expect(sem.inUse).toBe(2);
    expect(sem.waiting).toBe(2);
    r1();
    r1(); // releasing twice is harmless
    const r3 = await w3;
    expect(order).toEqual([3]);
    r2();
    const r4 = await w4;
    expect(order).toEqual([3, 4]);
    r3();
    r4();
    expect(sem.inUse).toBe(0);
  });
});
