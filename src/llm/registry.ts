/**
 * The providers palaver knows by name, in routing priority order (gateways
 * first, then direct APIs, then local servers), following nanobot's
 * providers/registry.py so a nanobot config.json routes the same way.
 * Pure data plus lookups; the routing itself is in providers.ts.
 */

export interface ProviderSpec {
  /** Canonical name, the key in config.providers (nanobot's spellings like "lm_studio" match too). */
  name: string;
  /** Default base URL of the OpenAI-compatible API; null when the user must give apiBase. */
  baseURL: string | null;
  /** Lowercase substrings of a model name that point to this provider ("claude" → anthropic). */
  keywords: readonly string[];
  /** How this provider's API keys start, when they have a telling prefix (a hint, not a rule). */
  keyPrefix?: string;
  /** Routes models of many vendors ("vendor/model" ids), so it is preferred when nothing names a provider. */
  gateway: boolean;
  /** A server on this machine that needs no key; chosen automatically only when no provider has a key. */
  local: boolean;
}

const spec = (
  name: string,
  baseURL: string | null,
  keywords: readonly string[],
  more: Partial<Pick<ProviderSpec, "keyPrefix" | "gateway" | "local">> = {},
): ProviderSpec => ({ name, baseURL, keywords, gateway: false, local: false, ...more });

/** Base URLs from nanobot's registry and each provider's OpenAI-compatibility docs. */
export const PROVIDER_REGISTRY: readonly ProviderSpec[] = [
  spec("openrouter", "https://openrouter.ai/api/v1", ["openrouter"], { gateway: true, keyPrefix: "sk-or-" }),
  spec("aihubmix", "https://aihubmix.com/v1", ["aihubmix"], { gateway: true }),
  spec("siliconflow", "https://api.siliconflow.cn/v1", ["siliconflow"], { gateway: true }),
  spec("volcengine", "https://ark.cn-beijing.volces.com/api/v3", ["volcengine", "volces", "ark"], {
    gateway: true,
  }),
  spec("anthropic", "https://api.anthropic.com/v1/", ["anthropic", "claude"], { keyPrefix: "sk-ant-" }),
  spec("openai", "https://api.openai.com/v1", ["openai", "gpt"]),
  spec("deepseek", "https://api.deepseek.com/v1", ["deepseek"]),
  spec("gemini", "https://generativelanguage.googleapis.com/v1beta/openai/", ["gemini", "gemma"], {
    keyPrefix: "AIza",
  }),
  spec("zhipu", "https://open.bigmodel.cn/api/paas/v4", ["zhipu", "glm", "zai"]),
  spec("dashscope", "https://dashscope.aliyuncs.com/compatible-mode/v1", ["qwen", "dashscope"]),
  spec("moonshot", "https://api.moonshot.ai/v1", ["moonshot", "kimi"]),
  spec("minimax", "https://api.minimax.io/v1", ["minimax"]),
  spec("mistral", "https://api.mistral.ai/v1", [
    "mistral",
    "magistral",
    "ministral",
    "codestral",
    "devstral",
  ]),
  spec("xai", "https://api.x.ai/v1", ["xai", "grok"], { keyPrefix: "xai-" }),
  spec("groq", "https://api.groq.com/openai/v1", ["groq"], { keyPrefix: "gsk_" }),
  spec("vllm", "http://127.0.0.1:8000/v1", ["vllm"], { local: true }),
  spec("ollama", "http://127.0.0.1:11434/v1", ["ollama"], { local: true }),
  spec("lmstudio", "http://127.0.0.1:1234/v1", ["lmstudio", "lm-studio", "lm_studio"], { local: true }),
  // Any OpenAI-compatible endpoint: the user gives apiBase (and a key if it checks one).
  spec("custom", null, []),
];

/** "lm_studio", "lmStudio" and "LM-Studio" are one name: nanobot writes snake_case or camelCase. */
export function canonicalName(name: string): string {
  return name.toLowerCase().replace(/[-_]/g, "");
}

/** The registry entry for a config.providers key or a model prefix, or undefined for a name palaver does not know. */
export function findSpec(name: string): ProviderSpec | undefined {
  const wanted = canonicalName(name);
  return PROVIDER_REGISTRY.find((s) => s.name === wanted);
}

/** The keyword of `spec` in a model name, if any: "claude-sonnet-4" has "claude"; "lm-studio" and "lm_studio" are one. */
export function modelKeyword(model: string, spec: ProviderSpec): string | undefined {
  const bare = canonicalName(model);
  return spec.keywords.find((kw) => bare.includes(canonicalName(kw)));
}

/** The config.providers key for a provider name however it is spelled ("lmStudio" for "lmstudio"). */
export function entryNamed(providers: Readonly<Record<string, unknown>>, name: string): string | undefined {
  if (Object.hasOwn(providers, name)) return name;
  const wanted = canonicalName(name);
  return Object.keys(providers).find((key) => canonicalName(key) === wanted);
}
