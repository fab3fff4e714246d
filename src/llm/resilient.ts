/**
 * LLM fault handling above the per-call retries: fallback models tried in
 * order when a model keeps failing, and a circuit breaker per model so a dead
 * provider fails fast instead of making every message wait for the whole
 * retry budget. A paused model is tried again (once) after the cooldown.
 */
import type { Config } from "../config/schema.js";
import { logger, type Logger } from "../log.js";
import { LlmError } from "../util/errors.js";
import { createProvider } from "./openai-provider.js";
import { normalizeModel, resolveProvider } from "./providers.js";
import type { ChatRequest, ChatResponse, Provider } from "./types.js";

export interface BreakerOptions {
  /** Failed calls in a row that open the circuit. */
  threshold: number;
  cooldownMs: number;
  now?: () => number;
}

/** Closed → (threshold failures) → open → (cooldown) → half-open: one trial call decides. */
export class CircuitBreaker {
  private failures = 0;
  private openUntil = 0;
  private trialInFlight = false;

  constructor(private readonly opts: BreakerOptions) {}

  get state(): "closed" | "open" | "half-open" {
    if (this.failures < this.opts.threshold) return "closed";
    return this.now() < this.openUntil ? "open" : "half-open";
  }

  /** Whether a call may go through now (in half-open, only one at a time). */
  allow(): boolean {
    switch (this.state) {
      case "closed":
        return true;
      case "open":
        return false;
      case "half-open":
        if (this.trialInFlight) return false;
        this.trialInFlight = true;
        return true;
    }
  }

  success(): void {
    this.failures = 0;
    this.trialInFlight = false;
  }

  failure(): void {
    this.trialInFlight = false;
    this.failures++;
    if (this.failures >= this.opts.threshold) this.openUntil = this.now() + this.opts.cooldownMs;
  }

  /** Milliseconds until an open circuit lets a trial call through. */
  get retryInMs(): number {
    return Math.max(0, this.openUntil - this.now());
  }

  private now(): number {
    return (this.opts.now ?? Date.now)();
  }
}

/** Failures that another model (or a later try) may not have; a bad key or a refused request are not. */
function worthFallingBack(err: LlmError): boolean {
  return err.retryable || err.status === 404;
}

export interface ResilientProviderOptions {
  /** Models in order of preference; the first is the primary. */
  models: string[];
  breaker: BreakerOptions;
  log?: Logger;
}

export class ResilientProvider implements Provider {
  readonly model: string;
  private readonly breakers = new Map<string, CircuitBreaker>();
  private readonly log: Logger;

  constructor(
    private readonly inner: Provider,
    private readonly opts: ResilientProviderOptions,
  ) {
    if (opts.models.length === 0) throw new Error("ResilientProvider needs at least one model");
    this.model = opts.models[0]!;
    this.log = opts.log ?? logger("llm");
    for (const model of opts.models) this.breakers.set(model, new CircuitBreaker(opts.breaker));
  }

  /** Per model: closed, open or half-open (for /readyz). */
  circuitStates(): Record<string, "closed" | "open" | "half-open"> {
    return Object.fromEntries([...this.breakers].map(([model, b]) => [model, b.state]));
  }

  async chat(req: ChatRequest, signal?: AbortSignal): Promise<ChatResponse> {
    const models = req.model ? [req.model] : this.opts.models;
    let lastError: LlmError | undefined;
    for (const model of models) {
      const breaker = this.breakers.get(model);
      if (breaker && !breaker.allow()) {
        lastError ??= new LlmError(
          `model ${model} is paused for ${Math.ceil(breaker.retryInMs / 1000)} s after repeated failures`,
          "unavailable",
          true,
        );
        continue;
      }
      try {
        const response = await this.inner.chat({ ...req, model }, signal);
        breaker?.success();
        if (model !== this.model)
          this.log.warn({ model, primary: this.model }, "answered by a fallback model");
        return response;
      } catch (err) {
        if (!(err instanceof LlmError) || err.kind === "aborted" || signal?.aborted) throw err;
        if (err.partialText) {
          // Part of the answer is on screen: another model would start it over beside it.
          breaker?.failure();
          throw err;
        }
        if (!worthFallingBack(err)) {
          breaker?.success(); // the model answered; the request itself is the problem
          throw err;
        }
        breaker?.failure();
        if (breaker?.state === "open") {
          this.log.error({ model, cooldownMs: breaker.retryInMs }, "model keeps failing; pausing it");
        }
        lastError = err;
      }
    }
    throw lastError ?? new LlmError("no model to try", "unavailable", true);
  }
}

/** The configured provider with fallback models and circuit breakers around it. */
export function createLlm(config: Config, log?: Logger): Provider {
  const inner = createProvider(config, log);
  const { name } = resolveProvider(config);
  const defaults = config.agents.defaults;
  const models = [inner.model, ...defaults.fallbackModels.map((m) => normalizeModel(m, name))];
  return new ResilientProvider(inner, {
    models: [...new Set(models)],
    breaker: {
      threshold: defaults.llm.breakerThreshold,
      cooldownMs: Math.round(defaults.llm.breakerCooldown * 1000),
    },
    ...(log ? { log } : {}),
  });
}
