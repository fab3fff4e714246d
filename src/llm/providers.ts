/**
 * Which OpenAI-compatible endpoint to talk to, decided from the config alone
 * (a pure function: no env, no network). Env overrides are already folded
 * into the config by the loader, so error messages name both the config key
 * and the env var that sets it.
 */
import type { Config, ProviderConfig } from "../config/schema.js";
import { ConfigError } from "../util/errors.js";

export interface KnownProvider {
  /** Default base URL of the OpenAI-compatible API; null when the user must give apiBase. */
  baseURL: string | null;
  /** Whether the default endpoint needs an API key (local servers do not). */
  needsKey: boolean;
}

/** Providers palaver knows by name. Any other name works when it has an apiBase (like "custom"). */
export const KNOWN_PROVIDERS: Readonly<Record<string, KnownProvider>> = {
  openai: { baseURL: "https://api.openai.com/v1", needsKey: true },
  openrouter: { baseURL: "https://openrouter.ai/api/v1", needsKey: true },
  deepseek: { baseURL: "https://api.deepseek.com/v1", needsKey: true },
  groq: { baseURL: "https://api.groq.com/openai/v1", needsKey: true },
  ollama: { baseURL: "http://127.0.0.1:11434/v1", needsKey: false },
  vllm: { baseURL: "http://127.0.0.1:8000/v1", needsKey: false },
  custom: { baseURL: null, needsKey: false },
};

export interface ResolvedProvider {
  /** The key of config.providers that was chosen. */
  name: string;
  /** May be "" for endpoints that need no key. */
  apiKey: string;
  baseURL: string;
  extraHeaders: Record<string, string>;
  /** The model id to send, with a redundant "provider/" prefix removed. */
  model: string;
}

/** The env var that sets providers.NAME.apiKey (PALAVER_SECTION__KEY convention). */
export function apiKeyEnvVar(name: string): string {
  return `PALAVER_PROVIDERS__${name.toUpperCase().replace(/[^A-Z0-9]/g, "_")}__API_KEY`;
}

function apiBaseOf(pc: ProviderConfig): string | null {
  const base = pc.apiBase?.trim();
  return base ? base : null;
}

/**
 * Whether this entry can be used without an API key: local servers, and any
 * entry whose apiBase the user set (a proxy or self-hosted endpoint may not
 * check keys; if it does, the first call fails with a clear auth error).
 */
function worksWithoutKey(name: string, pc: ProviderConfig): boolean {
  if (apiBaseOf(pc)) return true;
  const known = KNOWN_PROVIDERS[name];
  return known !== undefined && !known.needsKey && known.baseURL !== null;
}

/** Base URL of an entry, or null when it has none (unknown name or custom without apiBase). */
function baseURLOf(name: string, pc: ProviderConfig): string | null {
  return apiBaseOf(pc) ?? KNOWN_PROVIDERS[name]?.baseURL ?? null;
}

/**
 * nanobot writes models as "deepseek/deepseek-chat" or "ollama/llama3.2".
 * The endpoint itself wants the bare id, except OpenRouter, whose ids are
 * "vendor/model" and must be kept whole.
 */
export function normalizeModel(model: string, providerName: string): string {
  const slash = model.indexOf("/");
  if (slash <= 0 || providerName === "openrouter") return model;
  const prefix = model.slice(0, slash).toLowerCase();
  return prefix === providerName.toLowerCase() ? model.slice(slash + 1) : model;
}

function resolved(name: string, pc: ProviderConfig, baseURL: string, model: string): ResolvedProvider {
  return {
    name,
    apiKey: pc.apiKey.trim(),
    baseURL,
    extraHeaders: { ...(pc.extraHeaders ?? {}) },
    model: normalizeModel(model, name),
  };
}

function explicitProvider(config: Config, name: string): ResolvedProvider {
  const pc = config.providers[name];
  const known = KNOWN_PROVIDERS[name];
  if (!pc) {
    const hint = known
      ? `add "providers": { "${name}": { "apiKey": "..." } } to the config, or set ${apiKeyEnvVar(name)} in .env`
      : `add "providers": { "${name}": { "apiBase": "https://...", "apiKey": "..." } } to the config`;
    throw new ConfigError(
      `agents.defaults.provider is "${name}" but there is no providers.${name} entry: ${hint}.`,
      [`providers.${name}: missing`],
    );
  }
  const baseURL = baseURLOf(name, pc);
  if (!baseURL) {
    const what = name === "custom" ? `"custom" provider` : `provider "${name}" is not one palaver knows and`;
    throw new ConfigError(
      `The ${what} needs an API address: set providers.${name}.apiBase (for example "http://127.0.0.1:8080/v1").`,
      [`providers.${name}.apiBase: required`],
    );
  }
  if (!pc.apiKey.trim() && !worksWithoutKey(name, pc)) {
    throw new ConfigError(
      `providers.${name}.apiKey is empty: set ${apiKeyEnvVar(name)} in .env (or providers.${name}.apiKey in the config).`,
      [`providers.${name}.apiKey: required`],
    );
  }
  return resolved(name, pc, baseURL, config.agents.defaults.model);
}

/**
 * Picks the provider: agents.defaults.provider when it names one, else
 * ("auto") the first entry with an API key, else the first that needs none.
 * Throws ConfigError saying which key or env var to set.
 */
export function resolveProvider(config: Config): ResolvedProvider {
  const wanted = config.agents.defaults.provider.trim();
  if (wanted && wanted !== "auto") return explicitProvider(config, wanted);

  const model = config.agents.defaults.model;
  const entries = Object.entries(config.providers);
  // First pass: an entry with a key and an address (object order = the user's order).
  for (const [name, pc] of entries) {
    const baseURL = baseURLOf(name, pc);
    if (pc.apiKey.trim() && baseURL) return resolved(name, pc, baseURL, model);
  }
  // Second pass: something that needs no key (a local server or an explicit apiBase).
  for (const [name, pc] of entries) {
    const baseURL = baseURLOf(name, pc);
    if (baseURL && worksWithoutKey(name, pc)) return resolved(name, pc, baseURL, model);
  }
  const keyedButUnknown = entries.filter(([name, pc]) => pc.apiKey.trim() && !baseURLOf(name, pc));
  const extra = keyedButUnknown.length
    ? ` (providers.${keyedButUnknown.map(([n]) => n).join(", providers.")} has a key but palaver does not know its address: set its apiBase)`
    : "";
  throw new ConfigError(
    `No LLM provider is configured${extra}. Set an API key, e.g. ${apiKeyEnvVar("openai")}=sk-... ` +
      `(or ${apiKeyEnvVar("openrouter")}) in .env, or providers.openai.apiKey in the config; ` +
      `for a local server set providers.ollama.apiBase or providers.vllm.apiBase.`,
    ["providers: no entry with an apiKey or a local apiBase"],
  );
}
