import { describe, expect, it } from "vitest";
import { settleWithin, TimeoutError, untilAborted, withTimeout } from "../../src/util/timeout.js";

/** A promise that never settles (the timers under test must end the wait). */
const never = new Promise<never>(() => undefined);

describe("bounded waits", () => {
  it("withTimeout passes the result through, or says what timed out", async () => {
    await expect(withTimeout(Promise.resolve(7), 1000, "adding")).resolves.toBe(7);
    const err = await withTimeout(never, 5, "connecting to Slack").catch((e: unknown) => e);
    expect(err).toBeInstanceOf(TimeoutError);
    expect((err as Error).message).toBe("connecting to Slack timed out after 5 ms");
  });

  it("withTimeout and untilAborted end with the signal's reason as soon as it aborts", async () => {
    const controller = new AbortController();
    const waiting = withTimeout(never, 60_000, "waiting", controller.signal);
    const aborted = untilAborted(never, controller.signal);
    controller.abort(new Error("shutting down"));
    await expect(waiting).rejects.toThrow("shutting down");
    await expect(aborted).rejects.toThrow("shutting down");
    await expect(untilAborted(Promise.resolve(1), controller.signal)).rejects.toThrow("shutting down");
  });

  it("settleWithin never rejects and says whether the work settled in time", async () => {
    await expect(settleWithin(Promise.reject(new Error("x")), 1000)).resolves.toBe(true);
    await expect(settleWithin(never, 5)).resolves.toBe(false);
  });
});
