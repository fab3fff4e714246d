import { expect } from "vitest";
import { LlmError } from "../../src/util/errors.js";

/** The LlmError `p` rejects with (the test fails when it resolves or rejects with something else). */
export async function llmFailure(p: Promise<unknown>): Promise<LlmError> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(LlmError);
  return err as LlmError;
}
