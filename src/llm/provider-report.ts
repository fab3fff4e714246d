/**
 * What `palaver status`, `/status` and `config check` say about the LLM
 * endpoint: which provider the routing chose, where, with which model and
 * why, and warnings when that choice looks wrong. Never the key itself.
 */
import type { Config } from "../config/schema.js";
import { errorMessage } from "../util/errors.js";
import { resolveProvider, type ProviderRule } from "./providers.js";
import { entryNamed, findSpec, modelKeyword, PROVIDER_REGISTRY, type ProviderSpec } from "./registry.js";

export type ProviderChoice =
  | {
      provider: string;
      baseURL: string;
      model: string;
      rule: ProviderRule;
      reason: string;
      warnings: string[];
    }
  | { error: string; warnings: string[] };

/** The routing result for the report: the choice, or why there is none. */
export function describeProviderChoice(config: Config): ProviderChoice {
  try {
    const r = resolveProvider(config);
    const choice = { provider: r.name, baseURL: r.baseURL, model: r.model, rule: r.rule, reason: r.reason };
    return { ...choice, warnings: providerWarnings(config, r.name) };
  } catch (err) {
    return { error: errorMessage(err), warnings: providerWarnings(config, null) };
  }
}

/** One line for people: "anthropic at https://... with model claude-opus-4-5 (the model name starts with ...)". */
export function formatProviderChoice(c: ProviderChoice): string {
  if ("error" in c) return `none: ${c.error}`;
  return `${c.provider} at ${c.baseURL} with model ${c.model} (${c.reason})`;
}

/** The first provider (priority order) with a keyword in the model name, and the keyword. */
function modelOwner(model: string): { spec: ProviderSpec; keyword: string } | undefined {
  for (const spec of PROVIDER_REGISTRY) {
    const keyword = modelKeyword(model, spec);
    if (keyword) return { spec, keyword };
  }
  return undefined;
}

/**
 * Settings that make the choice look wrong: a key palaver cannot use (no
 * known address), a key that looks like another provider's, and a model name
 * that belongs to a provider other than the chosen one. (An apiBase that is
 * not a URL, or a placeholder key, is refused when the config loads.)
 */
function providerWarnings(config: Config, chosen: string | null): string[] {
  const warnings: string[] = [];
  for (const [name, pc] of Object.entries(config.providers)) {
    const key = pc.apiKey.trim();
    const base = pc.apiBase?.trim();
    const spec = findSpec(name);
    if (key && !base && !spec?.baseURL) {
      warnings.push(
        `providers.${name} has an apiKey but palaver does not know its address: set providers.${name}.apiBase`,
      );
    }
    const keyOwner = key
      ? PROVIDER_REGISTRY.find((s) => s.keyPrefix && key.startsWith(s.keyPrefix))
      : undefined;
    if (keyOwner && spec && keyOwner.name !== spec.name && !base) {
      warnings.push(
        `providers.${name}.apiKey looks like a key for ${keyOwner.name} (it starts with "${keyOwner.keyPrefix}")`,
      );
    }
  }
  if (chosen !== null) warnings.push(...modelWarnings(config, chosen));
  return warnings;
}

/** The model name belongs to a provider other than the chosen one (gateways and proxies serve every vendor). */
function modelWarnings(config: Config, chosen: string): string[] {
  const chosenSpec = findSpec(chosen);
  if (!chosenSpec || chosenSpec.gateway || chosenSpec.local || chosenSpec.name === "custom") return [];
  const model = config.agents.defaults.model;
  const keyedEntry = (spec: ProviderSpec) => {
    const name = entryNamed(config.providers, spec.name);
    return name !== undefined && config.providers[name]!.apiKey.trim() !== "" ? name : undefined;
  };
  const owner = modelOwner(model);
  const ownerEntry = owner && owner.spec !== chosenSpec ? keyedEntry(owner.spec) : undefined;
  if (owner && ownerEntry) {
    return [
      `the model "${model}" looks like ${owner.spec.name}'s ("${owner.keyword}") and providers.${ownerEntry} ` +
        `has a key, but it is sent to ${chosen}: set agents.defaults.provider to "${ownerEntry}" or "auto"`,
    ];
  }
  const slash = model.indexOf("/");
  const named = slash > 0 ? findSpec(model.slice(0, slash)) : undefined;
  if (named && named !== chosenSpec) {
    return [
      `the model "${model}" names ${named.name}, which has no apiKey, so it is sent to ${chosen} as is: ` +
        `check that ${chosen} serves it, or set providers.${named.name}.apiKey`,
    ];
  }
  return [];
}
