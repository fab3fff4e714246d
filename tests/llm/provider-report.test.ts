/** What status, /status and config check say about the chosen LLM endpoint. */
import { afterEach, describe, expect, it } from "vitest";
import { ConfigSchema } from "../../src/config/schema.js";
import { describeProviderChoice } from "../../src/llm/provider-report.js";
import { startHarness, type Harness } from "../helpers/agent-harness.js";

const parse = (model: string, providers: Record<string, unknown>, provider = "auto") =>
  ConfigSchema.parse({ agents: { defaults: { model, provider } }, providers });

let h: Harness | undefined;
afterEach(async () => {
  await h?.cleanup();
  h = undefined;
});

describe("describeProviderChoice", () => {
  it("a nanobot anthropic-only config routes cleanly, without warnings", () => {
    const c = describeProviderChoice(
      parse("anthropic/claude-opus-4-5", { anthropic: { apiKey: "sk-ant-1" }, vllm: { apiBase: null } }),
    );
    expect(c).toEqual({
      provider: "anthropic",
      baseURL: "https://api.anthropic.com/v1/",
      model: "claude-opus-4-5",
      rule: "prefix",
      reason: 'the model name starts with "anthropic/"',
      warnings: [],
    });
  });

  it("warns when the model names a provider without a key and goes elsewhere as is", () => {
    const c = describeProviderChoice(parse("anthropic/claude-opus-4-5", { gemini: { apiKey: "AIza-1" } }));
    expect(c).toMatchObject({ provider: "gemini", rule: "priority" });
    expect(c.warnings).toEqual([
      'the model "anthropic/claude-opus-4-5" names anthropic, which has no apiKey, so it is sent to gemini as is: ' +
        "check that gemini serves it, or set providers.anthropic.apiKey",
    ]);
  });

  it("a gateway serving another vendor's model is not a warning", () => {
    const c = describeProviderChoice(
      parse("anthropic/claude-opus-4-5", { openrouter: { apiKey: "sk-or-1" } }),
    );
    expect(c).toMatchObject({ provider: "openrouter", warnings: [] });
  });

  it("reports the routing error instead of throwing", () => {
    const c = describeProviderChoice(parse("gpt-4o", { mystery: { apiKey: "k" } }));
    expect(c).toMatchObject({ error: expect.stringContaining("providers.mystery has a key") as unknown });
    expect(c.warnings).toEqual([
      "providers.mystery has an apiKey but palaver does not know its address: set providers.mystery.apiBase",
    ]);
  });
});

describe("/status", () => {
  it("names the provider, its address, the model and the rule", async () => {
    h = await startHarness();
    const status = (await h.ask("chat", "/status")).content;
    expect(status).toContain(
      `LLM: custom at ${h.fake!.baseURL} with model fake-model (agents.defaults.provider is "custom")`,
    );
  });
});
