/** The real OpenAI provider pointed at a FakeOpenAI, with test-friendly timings. */
import { pino } from "pino";
import { OpenAIProvider, type OpenAIProviderOptions } from "../../src/llm/openai-provider.js";
import type { FakeOpenAI } from "../fakes/openai-server.js";

export function fakeProvider(
  fake: FakeOpenAI,
  overrides: Partial<OpenAIProviderOptions> = {},
): OpenAIProvider {
  return new OpenAIProvider({
    apiKey: "test-key",
    baseURL: fake.baseURL,
    model: "fake-model",
    maxTokens: 256,
    temperature: 0,
    timeoutMs: 10_000,
    maxRetries: 0,
    retryBaseMs: 1,
    retryMaxMs: 5,
    log: pino({ level: "silent" }),
    ...overrides,
  });
}
