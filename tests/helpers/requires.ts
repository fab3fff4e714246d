/**
 * Tests that need something of the system (bubblewrap, Chromium, python3, systemd-analyze, ...).
 * On a developer machine without it they skip and print why. In CI (`CI` set) a quiet skip would
 * hide exactly what CI is there to check, so the missing dependency fails the run instead, with
 * the same reason (.ci/run installs every one of them).
 */
import { spawnSync } from "node:child_process";
import { it, type TestContext } from "vitest";

/** CI as the usual runners set it ("true", "1"); "false" or "0" turn it off again. */
function inCi(env: NodeJS.ProcessEnv = process.env): boolean {
  const ci = env.CI?.trim().toLowerCase();
  return ci !== undefined && ci !== "" && ci !== "false" && ci !== "0";
}

const failure = (reason: string) =>
  new Error(`${reason} (required because CI is set: .ci/run installs it; unset CI to skip instead)`);

/**
 * `reason`: why a dependency is missing or unusable, or "" / undefined when it is there.
 * Returns whether the dependent tests must skip (for describe.skipIf / it.skipIf). In CI it
 * also registers, where it is called, a test that fails with the reason: the dependent tests
 * still skip rather than fail with some confusing error of their own.
 */
export function requireOrSkip(reason: string | undefined): boolean {
  if (!reason) return false;
  if (inCi()) {
    it(`has what it needs: ${reason}`, () => {
      throw failure(reason);
    });
  } else {
    console.warn(`skipped: ${reason}`);
  }
  return true;
}

/** The same inside a running test, for a dependency found unusable only once tried. */
export function requireOrSkipNow(ctx: TestContext, reason: string): void {
  if (inCi()) throw failure(reason);
  ctx.skip(reason);
}

/** Whether `command` is on PATH. */
export function haveCommand(command: string): boolean {
  return spawnSync("sh", ["-c", 'command -v "$0"', command], { stdio: "ignore" }).status === 0;
}
