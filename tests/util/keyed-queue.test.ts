import { describe, expect, it } from "vitest";
import { KeyedQueue } from "../../src/util/keyed-queue.js";
import { TaskSet } from "../../src/util/task-set.js";

function deferred(): { promise: Promise<void>; resolve: () => void } {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve };
}

describe("KeyedQueue", () => {
  it("runs one key's work in order, other keys alongside, and a failure does not stop the chain", async () => {
    const queue = new KeyedQueue();
    const order: string[] = [];
    const gate = deferred();
    const first = queue.run("a", async () => {
      await gate.promise;
      order.push("a1");
    });
    const failing = queue.run("a", () => {
      order.push("a2");
      throw new Error("boom");
    });
    const third = queue.run("a", () => order.push("a3"));
    await queue.run("b", () => order.push("b1")); // not behind key a
    expect(order).toEqual(["b1"]);
    expect(queue.busy("a")).toBe(true);
    gate.resolve();
    await first;
    await expect(failing).rejects.toThrow("boom");
    await third;
    expect(order).toEqual(["b1", "a1", "a2", "a3"]);
    await queue.idle();
    expect(queue.size).toBe(0);
  });
});

describe("TaskSet", () => {
  it("forgets finished tasks and settles the rest within a bound", async () => {
    const tasks = new TaskSet();
    await tasks.add(Promise.resolve());
    await tasks.add(Promise.reject(new Error("x"))).catch(() => undefined);
    await expect(tasks.settle(1000)).resolves.toBe(true);
    expect(tasks.size).toBe(0);
    const gate = deferred();
    void tasks.add(gate.promise);
    await expect(tasks.settle(5)).resolves.toBe(false);
    gate.resolve();
    await expect(tasks.settle(1000)).resolves.toBe(true);
  });
});
