/** Polls until `cond` holds, failing the test after `timeoutMs`. */
export async function waitFor(
  cond: () => boolean | Promise<boolean>,
  timeoutMs = 5000,
  what = "condition",
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await cond())) {
    if (Date.now() > deadline) throw new Error(`${what} not met within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 10));
  }
}
