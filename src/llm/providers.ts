/**
 * Which OpenAI-compatible endpoint to talk to, decided from the config alone
 * (a pure function: no env, no network), in nanobot's order so a nanobot
 * config.json goes where nanobot would send it. Env overrides are already
 * folded into the config by the loader, so error messages name both the
 * config key and the env var that sets it.
 */
import type { Config, ProviderConfig } from "../config/schema.js";
import { didYouMean } from "../util/did-you-mean.js";
import { ConfigError } from "../util/errors.js";
import {
  canonicalName,
  entryNamed,
  findSpec,
  modelKeyword,
  PROVIDER_REGISTRY,
  type ProviderSpec,
} from "./registry.js";

/** Which routing rule chose the provider (shown by status, /status and config check). */
export type ProviderRule = "explicit" | "prefix" | "keyword" | "priority" | "local";

export interface ResolvedProvider {
  /** The key of config.providers that was chosen. */
  name: string;
  /** May be "" for endpoints that need no key. */
  apiKey: string;
  baseURL: string;
  extraHeaders: Record<string, string>;
  /** The model id to send, with a redundant "provider/" prefix removed. */
  model: string;
  rule: ProviderRule;
  /** The rule in words, for people: why this provider and not another. */
  reason: string;
}

/** The env var that sets providers.NAME.apiKey (PALAVER_SECTION__KEY convention). */
export function apiKeyEnvVar(name: string): string {
  return `PALAVER_PROVIDERS__${name.toUpperCase().replace(/[^A-Z0-9]/g, "_")}__API_KEY`;
}

function apiBaseOf(pc: ProviderConfig): string | null {
  const base = pc.apiBase?.trim();
  return base ? base : null;
}

const hasKey = (pc: ProviderConfig) => pc.apiKey.trim() !== "";

/**
 * Whether this entry can be used without an API key: local servers, and any
 * entry whose apiBase the user set (a proxy or self-hosted endpoint may not
 * check keys; if it does, the first call fails with a clear auth error).
 */
function worksWithoutKey(name: string, pc: ProviderConfig): boolean {
  if (apiBaseOf(pc)) return true;
  const known = findSpec(name);
  return known !== undefined && known.local && known.baseURL !== null;
}

/** Base URL of an entry, or null when it has none (unknown name or custom without apiBase). */
function baseURLOf(name: string, pc: ProviderConfig): string | null {
  return apiBaseOf(pc) ?? findSpec(name)?.baseURL ?? null;
}

/**
 * nanobot writes models as "deepseek/deepseek-chat" or "ollama/llama3.2".
 * The endpoint itself wants the bare id, except OpenRouter, whose ids are
 * "vendor/model" and must be kept whole.
 */
export function normalizeModel(model: string, providerName: string): string {
  const slash = model.indexOf("/");
  if (slash <= 0 || canonicalName(providerName) === "openrouter") return model;
  const prefix = model.slice(0, slash);
  return canonicalName(prefix) === canonicalName(providerName) ? model.slice(slash + 1) : model;
}

interface Choice {
  name: string;
  rule: ProviderRule;
  reason: string;
}

function resolved(config: Config, choice: Choice, baseURL: string): ResolvedProvider {
  const pc = config.providers[choice.name]!;
  return {
    name: choice.name,
    apiKey: pc.apiKey.trim(),
    baseURL,
    extraHeaders: { ...(pc.extraHeaders ?? {}) },
    model: normalizeModel(config.agents.defaults.model, choice.name),
    rule: choice.rule,
    reason: choice.reason,
  };
}

/** A known provider name `name` is probably a typo of ("olama" → "ollama"), or undefined. */
function misspelt(name: string, config: Config): string | undefined {
  if (findSpec(name)) return undefined;
  const names = [...PROVIDER_REGISTRY.map((s) => s.name), ...Object.keys(config.providers)];
  return didYouMean(
    name,
    names.filter((n) => n !== name),
  );
}

function explicitProvider(config: Config, wanted: string): ResolvedProvider {
  const name = entryNamed(config.providers, wanted);
  const known = findSpec(wanted);
  const near = misspelt(wanted, config);
  if (near !== undefined && (name === undefined || !baseURLOf(name, config.providers[name]!))) {
    throw new ConfigError(
      `agents.defaults.provider is "${wanted}", which is not a provider palaver knows: did you mean "${near}"?`,
      [`agents.defaults.provider: did you mean "${near}"?`],
    );
  }
  if (name === undefined) {
    const hint = known?.baseURL
      ? `add "providers": { "${wanted}": { "apiKey": "..." } } to the config, or set ${apiKeyEnvVar(wanted)} in .env`
      : `add "providers": { "${wanted}": { "apiBase": "https://...", "apiKey": "..." } } to the config`;
    throw new ConfigError(
      `agents.defaults.provider is "${wanted}" but there is no providers.${wanted} entry: ${hint}.`,
      [`providers.${wanted}: missing`],
    );
  }
  const pc = config.providers[name]!;
  const baseURL = baseURLOf(name, pc);
  if (!baseURL) {
    const what = known ? `"${name}" provider` : `provider "${name}" is not one palaver knows and`;
    throw new ConfigError(
      `The ${what} needs an API address: set providers.${name}.apiBase (for example "http://127.0.0.1:8080/v1").`,
      [`providers.${name}.apiBase: required`],
    );
  }
  if (!hasKey(pc) && !worksWithoutKey(name, pc)) {
    throw new ConfigError(
      `providers.${name}.apiKey is empty: set ${apiKeyEnvVar(name)} in .env (or providers.${name}.apiKey in the config).`,
      [`providers.${name}.apiKey: required`],
    );
  }
  return resolved(
    config,
    { name, rule: "explicit", reason: `agents.defaults.provider is "${wanted}"` },
    baseURL,
  );
}

/** A usable entry: it has an address, and a key unless it is a local server or has the user's apiBase. */
function usable(config: Config, name: string): string | null {
  const pc = config.providers[name]!;
  const baseURL = baseURLOf(name, pc);
  return baseURL && (hasKey(pc) || worksWithoutKey(name, pc)) ? baseURL : null;
}

/** Registry entries present in the config, in priority order, with their config key. */
function configuredSpecs(config: Config): { spec: ProviderSpec; name: string }[] {
  return PROVIDER_REGISTRY.flatMap((spec) => {
    const name = entryNamed(config.providers, spec.name);
    return name === undefined ? [] : [{ spec, name }];
  });
}

/** The auto rules in nanobot's order; null when nothing is usable. */
function autoChoice(config: Config): { choice: Choice; baseURL: string } | null {
  const model = config.agents.defaults.model.trim();
  const known = configuredSpecs(config);
  const keyed = (name: string) => hasKey(config.providers[name]!);
  const pick = (choice: Choice) => {
    const baseURL = usable(config, choice.name);
    return baseURL ? { choice, baseURL } : null;
  };

  // 1. "deepseek/deepseek-chat" names deepseek, when that entry has a key (or is a local server / the user's apiBase).
  const slash = model.indexOf("/");
  if (slash > 0) {
    const prefix = model.slice(0, slash);
    const name = entryNamed(config.providers, prefix);
    const spec = findSpec(prefix);
    const named = name !== undefined && (keyed(name) || spec?.local || apiBaseOf(config.providers[name]!));
    const hit = named
      ? pick({ name, rule: "prefix", reason: `the model name starts with "${prefix}/"` })
      : null;
    if (hit) return hit;
  }
  // 2. A keyword of a keyed provider ("claude" → anthropic), in priority order.
  for (const { spec, name } of known) {
    const kw = keyed(name) ? modelKeyword(model, spec) : undefined;
    const hit = kw ? pick({ name, rule: "keyword", reason: `the model name contains "${kw}"` }) : null;
    if (hit) return hit;
  }
  // 3. The first keyed provider in priority order (gateways first), then keyed entries palaver
  //    does not know by name but whose apiBase the user gave, in the config's order.
  const keyedNames = [
    ...known.map((k) => k.name),
    ...Object.keys(config.providers).filter((n) => !findSpec(n)),
  ].filter(keyed);
  for (const name of keyedNames) {
    const hit = pick({
      name,
      rule: "priority",
      reason: "the first provider with an API key (gateways first)",
    });
    if (hit) return hit;
  }
  // 4. Only when no provider has a key: an entry with the user's apiBase, then a local server's default address.
  if (keyedNames.length > 0) return null;
  const local = [
    ...Object.keys(config.providers).filter((n) => apiBaseOf(config.providers[n]!)),
    ...known.filter((k) => k.spec.local).map((k) => k.name),
  ];
  for (const name of local) {
    const hit = pick({ name, rule: "local", reason: "no provider has an API key; this one needs none" });
    if (hit) return hit;
  }
  return null;
}

/**
 * Picks the provider: agents.defaults.provider when it names one, else
 * ("auto") nanobot's order: a "provider/" prefix of the model, a keyword of
 * the model, the first keyed provider (gateways first), and a key-less local
 * server only when no provider has a key. Throws ConfigError saying which key
 * or env var to set.
 */
export function resolveProvider(config: Config): ResolvedProvider {
  const wanted = config.agents.defaults.provider.trim();
  if (wanted && wanted !== "auto") return explicitProvider(config, wanted);

  const auto = autoChoice(config);
  if (auto) return resolved(config, auto.choice, auto.baseURL);

  const keyedButUnknown = Object.entries(config.providers).filter(
    ([name, pc]) => hasKey(pc) && !baseURLOf(name, pc),
  );
  const named = (n: string) => {
    const near = misspelt(n, config);
    return near === undefined ? `providers.${n}` : `providers.${n} (did you mean "${near}"?)`;
  };
  const extra = keyedButUnknown.length
    ? ` (${keyedButUnknown.map(([n]) => named(n)).join(", ")} has a key but palaver does not know its address: set its apiBase)`
    : "";
  throw new ConfigError(
    `No LLM provider is configured${extra}. Set an API key, e.g. ${apiKeyEnvVar("openai")}=sk-... ` +
      `(or ${apiKeyEnvVar("openrouter")}) in .env, or providers.openai.apiKey in the config; ` +
      `for a local server set providers.ollama.apiBase or providers.vllm.apiBase.`,
    ["providers: no entry with an apiKey or a local apiBase"],
  );
}
