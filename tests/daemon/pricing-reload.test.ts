/**
 * `pricing` follows a reload: the real `palaver gateway` child is given new prices in config.json
 * and SIGHUP, and the next turn's cost in the usage ledger is at the new price, without a restart.
 */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { UsageLedger, usageLedgerPath } from "../../src/usage/ledger.js";
import { lastUserText } from "../fakes/openai-server.js";
import { GatewayHarness, writeGatewayConfig } from "../helpers/gateway-process.js";

const harness = new GatewayHarness({ prefix: "palaver-pricing-reload-" });
beforeEach(() => harness.start());
afterEach(() => harness.close());

/** Writes the harness's config with `fake-*` priced at `inputUsd` per million prompt tokens. */
function priceAt(inputUsd: number): Promise<string> {
  return writeGatewayConfig(
    harness.dir,
    { llmBaseURL: harness.llm.baseURL, telegram: harness.tg },
    { pricing: { "fake-*": { input: inputUsd, output: 0 } } },
  );
}

/** Sends `text` and waits for its answer. */
async function turn(text: string): Promise<void> {
  harness.tg.userMessage({ text });
  await harness.tg.waitForSent((m) => m.text === `re: ${text}`, 20_000);
}

describe("pricing on reload", { timeout: 120_000 }, () => {
  it("prices the turn after a SIGHUP at the new price", async () => {
    // Every call: a million prompt tokens, so the cost in USD is the price per million.
    harness.llm.setHandler((req) => ({
      content: `re: ${lastUserText(req)}`,
      usage: { prompt_tokens: 1_000_000, completion_tokens: 0 },
    }));
    await priceAt(1);
    const run = await harness.startGateway();
    await turn("before");

    await priceAt(3);
    run.child.kill("SIGHUP");
    await run.stderrIncludes("config reloaded");
    await turn("after");

    const ledger = new UsageLedger(usageLedgerPath(harness.dir)).read();
    expect(ledger.map((e) => e.costUsd)).toEqual([1, 3]);
    expect(run.stderr).not.toContain("take effect after a restart");
  });
});
