import { settleWithin } from "./timeout.js";

/**
 * Background work that a component started and must let finish (or give up
 * on) when it stops: add() each task, settle() once at stop. Finished tasks
 * leave the set by themselves.
 */
export class TaskSet {
  private readonly tasks = new Set<Promise<unknown>>();

  add<T>(task: Promise<T>): Promise<T> {
    const tracked = task.then(
      () => undefined,
      () => undefined,
    );
    this.tasks.add(tracked);
    void tracked.then(() => this.tasks.delete(tracked));
    return task;
  }

  get size(): number {
    return this.tasks.size;
  }

  /** Waits for every task, at most `ms`; true when all settled in time. */
  async settle(ms: number): Promise<boolean> {
    return settleWithin(Promise.all([...this.tasks]), ms);
  }
}
