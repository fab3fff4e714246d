/**
 * What an LLM call cost, from `pricing` in the config: US dollars per million tokens per model
 * (or glob, `gpt-4o*`). Pure. A model without a price is counted in tokens and costs `null`
 * ("no price"), never 0: a free local model and a model nobody priced are not the same thing.
 */

export interface ModelPrice {
  /** USD per million prompt tokens. */
  input: number;
  /** USD per million completion tokens (reasoning tokens are completion tokens). */
  output: number;
  /** USD per million prompt tokens served from the provider's cache; default: `input`. */
  cachedInput?: number;
}

export type Pricing = Readonly<Record<string, ModelPrice>>;

export interface TokenCounts {
  promptTokens: number;
  completionTokens: number;
  /** Of promptTokens, how many the provider served from its cache. */
  cachedTokens: number;
}

/**
 * The price of `model`: an exact key first, then the glob with the longest pattern that matches
 * (the most specific one), so `gpt-4o-mini` can be priced apart from `gpt-4o*`. A model
 * routed with a provider prefix (`openrouter/anthropic/claude-x`) is also looked up without it.
 */
export function priceOf(pricing: Pricing, model: string): ModelPrice | undefined {
  for (const name of namesOf(model)) {
    const exact = pricing[name];
    if (exact) return exact;
  }
  let best: { pattern: string; price: ModelPrice } | undefined;
  for (const [pattern, price] of Object.entries(pricing)) {
    if (!pattern.includes("*") && !pattern.includes("?")) continue;
    const re = globToRegExp(pattern);
    if (!namesOf(model).some((name) => re.test(name))) continue;
    if (!best || pattern.length > best.pattern.length) best = { pattern, price };
  }
  return best?.price;
}

/** The cost in USD, or null when the model has no price. */
export function costOf(pricing: Pricing, model: string, tokens: TokenCounts): number | null {
  const price = priceOf(pricing, model);
  if (!price) return null;
  const cached = Math.min(tokens.cachedTokens, tokens.promptTokens);
  const fresh = tokens.promptTokens - cached;
  const dollars =
    fresh * price.input +
    cached * (price.cachedInput ?? price.input) +
    tokens.completionTokens * price.output;
  return dollars / 1_000_000;
}

/** `openrouter/anthropic/claude-x` → itself, `anthropic/claude-x`, `claude-x`. */
function namesOf(model: string): string[] {
  const parts = model.split("/");
  return parts.map((_, i) => parts.slice(i).join("/"));
}

function globToRegExp(glob: string): RegExp {
  const body = glob
    .split("")
    .map((c) => (c === "*" ? ".*" : c === "?" ? "." : c.replace(/[.+^${}()|[\]\\]/g, "\\$&")))
    .join("");
  return new RegExp(`^${body}$`, "i");
}
