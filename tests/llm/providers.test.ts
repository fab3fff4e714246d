import { describe, expect, it } from "vitest";
import { ConfigSchema, type Config } from "../../src/config/schema.js";
import { apiKeyEnvVar, normalizeModel, resolveProvider } from "../../src/llm/providers.js";
import { ConfigError } from "../../src/util/errors.js";

function config(input: { provider?: string; model?: string; providers?: Record<string, unknown> }): Config {
  return ConfigSchema.parse({
    agents: { defaults: { provider: input.provider ?? "auto", model: input.model ?? "gpt-4o-mini" } },
    providers: input.providers ?? {},
  });
}

function configError(fn: () => unknown): ConfigError {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return err as ConfigError;
  }
  throw new Error("expected a ConfigError");
}

describe("resolveProvider: explicit provider", () => {
  it("uses the named entry with its default base URL", () => {
    const r = resolveProvider(
      config({ provider: "groq", providers: { openai: { apiKey: "sk-a" }, groq: { apiKey: "gsk-b" } } }),
    );
    expect(r).toEqual({
      name: "groq",
      apiKey: "gsk-b",
      baseURL: "https://api.groq.com/openai/v1",
      extraHeaders: {},
      model: "gpt-4o-mini",
    });
  });

  it("knows every default base URL", () => {
    // Pure resolution: nothing is contacted.
    const url = (name: string) =>
      resolveProvider(config({ provider: name, providers: { [name]: { apiKey: "k-123456" } } })).baseURL;
    expect(url("openai")).toBe("https://api.openai.com/v1");
    expect(url("openrouter")).toBe("https://openrouter.ai/api/v1");
    expect(url("deepseek")).toBe("https://api.deepseek.com/v1");
    expect(url("groq")).toBe("https://api.groq.com/openai/v1");
    expect(url("ollama")).toBe("http://127.0.0.1:11434/v1");
    expect(url("vllm")).toBe("http://127.0.0.1:8000/v1");
  });

  it("apiBase overrides the default and extraHeaders are copied", () => {
    const r = resolveProvider(
      config({
        provider: "openai",
        providers: { openai: { apiKey: "sk-a", apiBase: "http://proxy:1/v1", extraHeaders: { "X-A": "1" } } },
      }),
    );
    expect(r.baseURL).toBe("http://proxy:1/v1");
    expect(r.extraHeaders).toEqual({ "X-A": "1" });
  });

  it("a missing entry is a ConfigError naming the key and env var", () => {
    const e = configError(() => resolveProvider(config({ provider: "deepseek", providers: {} })));
    expect(e.message).toContain("providers.deepseek");
    expect(e.message).toContain("PALAVER_PROVIDERS__DEEPSEEK__API_KEY");
  });

  it("a known provider that needs a key fails without one", () => {
    const e = configError(() => resolveProvider(config({ provider: "openai", providers: { openai: {} } })));
    expect(e.message).toContain("providers.openai.apiKey");
    expect(e.message).toContain("PALAVER_PROVIDERS__OPENAI__API_KEY");
  });

  it("local providers need no key", () => {
    const r = resolveProvider(config({ provider: "ollama", providers: { ollama: {} } }));
    expect(r).toMatchObject({ name: "ollama", apiKey: "", baseURL: "http://127.0.0.1:11434/v1" });
  });

  it("custom needs apiBase", () => {
    const e = configError(() => resolveProvider(config({ provider: "custom", providers: { custom: {} } })));
    expect(e.message).toContain("providers.custom.apiBase");
    const r = resolveProvider(
      config({ provider: "custom", providers: { custom: { apiBase: "http://127.0.0.1:9/v1" } } }),
    );
    expect(r.baseURL).toBe("http://127.0.0.1:9/v1");
  });

  it("an unknown name works like custom with apiBase, and fails without", () => {
    const e = configError(() =>
      resolveProvider(config({ provider: "acme", providers: { acme: { apiKey: "k" } } })),
    );
    expect(e.message).toContain("providers.acme.apiBase");
    const r = resolveProvider(
      config({ provider: "acme", providers: { acme: { apiKey: "k", apiBase: "https://acme.test/v1" } } }),
    );
    expect(r).toMatchObject({ name: "acme", apiKey: "k", baseURL: "https://acme.test/v1" });
  });
});

describe("resolveProvider: auto", () => {
  it("picks the first entry with a key, in object order", () => {
    const r = resolveProvider(
      config({
        providers: { ollama: {}, openai: { apiKey: "" }, deepseek: { apiKey: "ds" }, groq: { apiKey: "gq" } },
      }),
    );
    expect(r.name).toBe("deepseek");
    expect(r.apiKey).toBe("ds");
  });

  it("falls back to the first entry that needs no key", () => {
    const r = resolveProvider(
      config({ providers: { openai: { apiKey: "" }, custom: {}, vllm: {}, ollama: {} } }),
    );
    // custom without apiBase is unusable, so vllm comes first.
    expect(r.name).toBe("vllm");
    expect(r.baseURL).toBe("http://127.0.0.1:8000/v1");
  });

  it("a keyed entry of an unknown provider without apiBase is skipped", () => {
    const r = resolveProvider(
      config({ providers: { anthropicish: { apiKey: "x" }, openai: { apiKey: "sk" } } }),
    );
    expect(r.name).toBe("openai");
  });

  it("nothing usable is a ConfigError saying what to set", () => {
    const e = configError(() => resolveProvider(config({ providers: { openai: {} } })));
    expect(e.message).toContain("PALAVER_PROVIDERS__OPENAI__API_KEY");
    expect(e.message).toContain(".env");
    expect(e.problems.length).toBeGreaterThan(0);
    const e2 = configError(() => resolveProvider(config({ providers: { mystery: { apiKey: "x" } } })));
    expect(e2.message).toContain("providers.mystery");
  });

  it("is pure: the same config gives the same answer and is not modified", () => {
    const c = config({ providers: { openai: { apiKey: "sk", extraHeaders: { a: "b" } } } });
    const before = JSON.stringify(c);
    const r1 = resolveProvider(c);
    r1.extraHeaders.c = "d";
    expect(resolveProvider(c)).toEqual({ ...r1, extraHeaders: { a: "b" } });
    expect(JSON.stringify(c)).toBe(before);
  });
});

describe("model prefixes", () => {
  it("strips a prefix that names the selected provider", () => {
    const r = resolveProvider(
      config({ model: "deepseek/deepseek-chat", providers: { deepseek: { apiKey: "k" } } }),
    );
    expect(r.model).toBe("deepseek-chat");
    expect(normalizeModel("ollama/llama3.2", "ollama")).toBe("llama3.2");
    expect(normalizeModel("Groq/llama-3.3-70b", "groq")).toBe("llama-3.3-70b");
  });

  it("keeps openrouter ids and foreign prefixes whole", () => {
    const r = resolveProvider(
      config({ model: "openrouter/anthropic/claude-3.5", providers: { openrouter: { apiKey: "k" } } }),
    );
    expect(r.model).toBe("openrouter/anthropic/claude-3.5");
    expect(normalizeModel("anthropic/claude-3.5", "openrouter")).toBe("anthropic/claude-3.5");
    expect(normalizeModel("meta-llama/llama-3", "groq")).toBe("meta-llama/llama-3");
    expect(normalizeModel("gpt-4o", "openai")).toBe("gpt-4o");
  });

  it("env var names follow PALAVER_SECTION__KEY", () => {
    expect(apiKeyEnvVar("openrouter")).toBe("PALAVER_PROVIDERS__OPENROUTER__API_KEY");
    expect(apiKeyEnvVar("my-proxy")).toBe("PALAVER_PROVIDERS__MY_PROXY__API_KEY");
  });
});
