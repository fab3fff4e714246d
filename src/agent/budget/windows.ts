/**
 * How many tokens a model's context window holds, and the budget settings
 * derived from the config: a per-model override (agents.defaults.contextWindows)
 * first, then a window the model's name states ("-32k"), then the known
 * default of its family, then agents.defaults.contextWindowTokens.
 */
import type { Config } from "../../config/schema.js";

type AgentDefaults = Config["agents"]["defaults"];

/** Known windows of common model families, matched against the name without a provider/ prefix. */
const KNOWN_WINDOWS: readonly (readonly [RegExp, number])[] = [
  [/^gpt-4\.1/, 1_047_576],
  [/^gpt-5/, 400_000],
  [/^(gpt-4o|chatgpt-4o|gpt-4-turbo|gpt-4-1106|gpt-4-0125)/, 128_000],
  [/^gpt-4(-0613|-0314)?$/, 8_192],
  [/^gpt-3\.5-turbo/, 16_385],
  [/^o[1-9](-|$)/, 200_000],
  [/^gpt-oss/, 131_072],
  [/claude/, 200_000],
  [/gemini/, 1_048_576],
  [/deepseek/, 128_000],
  [/llama-?3\.[1-3]|llama-?4/, 128_000],
  [/mistral-large|mistral-medium|codestral/, 128_000],
  [/qwen3|qwen-plus|qwen-turbo|qwen2\.5/, 131_072],
  [/glm-4/, 128_000],
  [/kimi|moonshot/, 128_000],
];

export interface BudgetSettings {
  /** The model whose tokenizer counts (the primary model). */
  model: string;
  /** The context window in tokens. */
  windowTokens: number;
  /** Tokens a prompt may use: contextBudget of the window, leaving room for maxTokens of answer. */
  budgetTokens: number;
  /** Unconsolidated history past this many tokens is consolidated into memory (consolidationRatio). */
  consolidationTokens: number;
}

/** The window of one model. */
export function contextWindowOf(
  model: string,
  defaults: Pick<AgentDefaults, "contextWindowTokens" | "contextWindows">,
): number {
  const bare = (model.split("/").pop() ?? model).toLowerCase();
  const override = defaults.contextWindows[model] ?? defaults.contextWindows[bare];
  if (override) return override;
  const stated = /-(\d{1,4})k$/.exec(bare);
  if (stated) return Number(stated[1]) * 1024;
  for (const [pattern, tokens] of KNOWN_WINDOWS) if (pattern.test(bare)) return tokens;
  return defaults.contextWindowTokens;
}

/**
 * The budget for a model and its fallbacks: the smallest of their windows, so
 * a prompt fits whichever of them answers.
 */
export function budgetSettings(defaults: AgentDefaults, models: readonly string[]): BudgetSettings {
  const windowTokens = Math.min(...models.map((m) => contextWindowOf(m, defaults)));
  // The answer needs room too; a window smaller than maxTokens still gets its share.
  const room = windowTokens - defaults.maxTokens;
  const share = Math.floor(windowTokens * defaults.contextBudget);
  return {
    model: models[0] ?? defaults.model,
    windowTokens,
    budgetTokens: room > share / 2 ? Math.min(share, room) : share,
    consolidationTokens: Math.floor(windowTokens * defaults.consolidationRatio),
  };
}
