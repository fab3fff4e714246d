/**
 * The context budget of one agent (or of the subagents): counts tokens with
 * the model's tokenizer and fits each call's prompt into the budget
 * (fit.ts), logging when it had to leave something out.
 */
import type { ChatMessage, ToolDefinition } from "../../llm/types.js";
import type { Logger } from "../../log.js";
import { fitMessages, type FitResult } from "./fit.js";
import { TokenCounter } from "./tokens.js";
import type { BudgetSettings } from "./windows.js";

/**
 * Below this share of the budget by the chars/4 estimate, the estimate is close enough: nothing
 * is left out either way. The tokenizer (slow to load, its tables kept for good) is loaded
 * only when a prompt comes nearer the limit, so short chats never pay for it.
 */
const PRECISE_FROM_SHARE = 0.5;

export class ContextBudget {
  readonly counter: TokenCounter;

  constructor(
    readonly settings: BudgetSettings,
    private readonly log?: Logger,
  ) {
    this.counter = new TokenCounter(settings.model);
  }

  /**
   * A copy of `messages` that fits the budget (times `share`: 0.5 after the
   * provider said the prompt was too long). Messages from `keepFrom` on are
   * the current turn: never dropped.
   */
  async fit(
    messages: readonly ChatMessage[],
    definitions: readonly ToolDefinition[] | undefined,
    keepFrom: number,
    share = 1,
  ): Promise<FitResult> {
    const budget = Math.floor(this.settings.budgetTokens * share);
    const fit = (): FitResult =>
      fitMessages({
        messages,
        budget,
        count: (m) => this.counter.message(m),
        fixed: this.counter.tools(definitions),
        keepFrom,
      });
    let result = fit();
    if (await this.preciseFor(result.tokensBefore, budget)) result = fit();
    if (result.stubbed || result.dropped || result.cut) {
      this.log?.info(
        {
          tokensBefore: result.tokensBefore,
          tokens: result.tokens,
          budget,
          stubbed: result.stubbed,
          dropped: result.dropped,
          cut: result.cut,
          fits: result.fits,
        },
        "context budget: left out older parts of the prompt",
      );
    }
    return result;
  }

  /**
   * Loads the model's tokenizer when a prompt of `tokens` (by the estimate) comes near `budget`;
   * true when counts changed from the estimate to the tokenizer's, so the prompt should be counted again.
   */
  async preciseFor(tokens: number, budget = this.settings.budgetTokens): Promise<boolean> {
    if (this.counter.precise || tokens <= budget * PRECISE_FROM_SHARE) return false;
    await this.counter.load();
    return this.counter.precise;
  }

  /** The provider said a prompt of about `tokens` (by our count) is too long for the model. */
  overflowed(tokens: number, what: string): void {
    this.log?.warn(
      { tokens, budget: this.settings.budgetTokens, window: this.settings.windowTokens },
      `context overflow reported by the provider; ${what}`,
    );
  }
}
