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
      rule: "explicit",
      reason: 'agents.defaults.provider is "groq"',
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
    expect(url("anthropic")).toBe("https://api.anthropic.com/v1/");
    expect(url("gemini")).toBe("https://generativelanguage.googleapis.com/v1beta/openai/");
    expect(url("moonshot")).toBe("https://api.moonshot.ai/v1");
    expect(url("zhipu")).toBe("https://open.bigmodel.cn/api/paas/v4");
    expect(url("dashscope")).toBe("https://dashscope.aliyuncs.com/compatible-mode/v1");
    expect(url("minimax")).toBe("https://api.minimax.io/v1");
    expect(url("siliconflow")).toBe("https://api.siliconflow.cn/v1");
    expect(url("volcengine")).toBe("https://ark.cn-beijing.volces.com/api/v3");
    expect(url("aihubmix")).toBe("https://aihubmix.com/v1");
    expect(url("mistral")).toBe("https://api.mistral.ai/v1");
    expect(url("xai")).toBe("https://api.x.ai/v1");
    expect(url("lmstudio")).toBe("http://127.0.0.1:1234/v1");
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
  it("without a prefix or keyword match, picks the first keyed provider in priority order", () => {
    const r = resolveProvider(
      config({
        providers: { ollama: {}, openai: { apiKey: "" }, deepseek: { apiKey: "ds" }, groq: { apiKey: "gq" } },
      }),
    );
    expect(r.name).toBe("deepseek");
    expect(r.apiKey).toBe("ds");
    expect(r.rule).toBe("priority");
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

/**
 * nanobot's generated config.json lists every provider, most of them empty
 * (apiBase null), and its default model is "anthropic/claude-opus-4-5".
 * These are the shapes its users point palaver at.
 */
function nanobotConfig(
  keyed: Record<string, Record<string, unknown>>,
  opts: { model?: string; provider?: string } = {},
): Config {
  const empty = { apiKey: "", apiBase: null, extraHeaders: null };
  const names = [
    "custom",
    "openrouter",
    "aihubmix",
    "siliconflow",
    "volcengine",
    "anthropic",
    "openai",
    "deepseek",
    "gemini",
    "zhipu",
    "dashscope",
    "moonshot",
    "minimax",
    "mistral",
    "groq",
    "vllm",
    "ollama",
    "lmStudio",
  ];
  const providers = Object.fromEntries(names.map((n) => [n, { ...empty, ...keyed[n] }]));
  return config({ model: opts.model ?? "anthropic/claude-opus-4-5", provider: opts.provider, providers });
}

describe("resolveProvider: nanobot configs", () => {
  it("an anthropic-only key goes to Anthropic's OpenAI-compatible endpoint, not to vllm", () => {
    const r = resolveProvider(nanobotConfig({ anthropic: { apiKey: "sk-ant-1" } }));
    expect(r).toMatchObject({
      name: "anthropic",
      baseURL: "https://api.anthropic.com/v1/",
      model: "claude-opus-4-5",
      rule: "prefix",
    });
  });

  it("an anthropic key with a bare model name is chosen by keyword", () => {
    const r = resolveProvider(
      nanobotConfig({ anthropic: { apiKey: "sk-ant-1" } }, { model: "claude-sonnet-4" }),
    );
    expect(r).toMatchObject({
      name: "anthropic",
      rule: "keyword",
      reason: 'the model name contains "claude"',
    });
  });

  it("an empty vllm entry is never used while another provider has a key", () => {
    // The model names no keyed provider: the keyed one still wins over vllm's default address.
    const r = resolveProvider(
      nanobotConfig({ anthropic: { apiKey: "sk-ant-1" } }, { model: "llama-3.3-70b" }),
    );
    expect(r).toMatchObject({ name: "anthropic", rule: "priority" });
  });

  it("a gemini-only key goes to Gemini", () => {
    const r = resolveProvider(nanobotConfig({ gemini: { apiKey: "AIza-1" } }, { model: "gemini-2.5-flash" }));
    expect(r).toMatchObject({
      name: "gemini",
      baseURL: "https://generativelanguage.googleapis.com/v1beta/openai/",
      model: "gemini-2.5-flash",
      rule: "keyword",
    });
    // Even with nanobot's default (anthropic) model and no anthropic key.
    expect(resolveProvider(nanobotConfig({ gemini: { apiKey: "AIza-1" } })).name).toBe("gemini");
  });

  it("openrouter + deepseek keys with deepseek/deepseek-chat go to deepseek", () => {
    const r = resolveProvider(
      nanobotConfig(
        { openrouter: { apiKey: "sk-or-1" }, deepseek: { apiKey: "sk-ds" } },
        { model: "deepseek/deepseek-chat" },
      ),
    );
    expect(r).toMatchObject({ name: "deepseek", model: "deepseek-chat", rule: "prefix", apiKey: "sk-ds" });
  });

  it("a gateway comes first when nothing names a keyed provider, and keeps vendor/model ids", () => {
    const r = resolveProvider(
      nanobotConfig(
        { openrouter: { apiKey: "sk-or-1" }, deepseek: { apiKey: "sk-ds" } },
        { model: "meta-llama/llama-4" },
      ),
    );
    expect(r).toMatchObject({ name: "openrouter", model: "meta-llama/llama-4", rule: "priority" });
    // The default model names anthropic, which has no key here: openrouter serves it whole.
    const r2 = resolveProvider(nanobotConfig({ openrouter: { apiKey: "sk-or-1" } }));
    expect(r2).toMatchObject({ name: "openrouter", model: "anthropic/claude-opus-4-5" });
  });

  it("ollama chosen explicitly is used without a key, even with other keys present", () => {
    const r = resolveProvider(
      nanobotConfig(
        { ollama: { apiBase: "http://127.0.0.1:11434/v1" }, anthropic: { apiKey: "sk-ant-1" } },
        { provider: "ollama", model: "ollama/llama3.2" },
      ),
    );
    expect(r).toMatchObject({ name: "ollama", apiKey: "", model: "llama3.2", rule: "explicit" });
  });

  it("a local server is chosen automatically only when no provider has a key", () => {
    const r = resolveProvider(nanobotConfig({}, { model: "llama3.2" }));
    expect(r).toMatchObject({ name: "vllm", baseURL: "http://127.0.0.1:8000/v1", rule: "local" });
    const withBase = resolveProvider(
      nanobotConfig({ ollama: { apiBase: "http://127.0.0.1:11434/v1" } }, { model: "llama3.2" }),
    );
    // The entry the user gave an address wins over vllm's default one.
    expect(withBase).toMatchObject({ name: "ollama", rule: "local" });
  });

  it("a key for a provider palaver cannot reach is an error, not a silent local fallback", () => {
    const e = configError(() =>
      resolveProvider(config({ model: "x", providers: { mystery: { apiKey: "k" }, vllm: {} } })),
    );
    expect(e.message).toContain("providers.mystery has a key but palaver does not know its address");
  });

  it("nanobot's camelCase and snake_case names match the registry", () => {
    const r = resolveProvider(config({ provider: "lm_studio", providers: { lmStudio: {} } }));
    expect(r).toMatchObject({ name: "lmStudio", baseURL: "http://127.0.0.1:1234/v1" });
    const p = resolveProvider(
      config({ model: "lm-studio/qwen3-8b", providers: { lmStudio: {}, openai: { apiKey: "sk" } } }),
    );
    expect(p).toMatchObject({ name: "lmStudio", model: "qwen3-8b", rule: "prefix" });
  });

  it("a user-named entry with an apiBase is chosen by its prefix", () => {
    const r = resolveProvider(
      config({
        model: "companyProxy/gpt-4o",
        providers: {
          openai: { apiKey: "sk" },
          companyProxy: { apiKey: "k", apiBase: "https://proxy.test/v1" },
        },
      }),
    );
    expect(r).toMatchObject({ name: "companyProxy", model: "gpt-4o", rule: "prefix" });
  });
});
