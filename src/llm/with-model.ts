/**
 * A provider that asks for another model by default (a named agent's `model`, the utility or
 * vision slot): the same endpoint, retries and fallbacks, one more field in the request.
 */
import type { Provider } from "./types.js";

export function withModel(provider: Provider, model: string | undefined): Provider {
  if (!model || model === provider.model) return provider;
  return {
    model,
    chat: (req, signal) => provider.chat({ ...req, model: req.model ?? model }, signal),
  };
}
