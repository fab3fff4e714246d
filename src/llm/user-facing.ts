/** What the chat is told when the language model fails: plain words, no stack, no secrets. */
import { LlmError, type LlmErrorKind } from "../util/errors.js";

const REASONS: Record<
  Exclude<LlmErrorKind, "auth" | "quota" | "bad_request" | "context_overflow" | "aborted">,
  string
> = {
  rate_limit: "rate limited by the provider",
  server: "the provider had a server error",
  network: "could not connect to it",
  timeout: "it took too long to answer",
  invalid_response: "it sent an answer I could not read",
  unavailable: "it has been failing, so I'm giving it a short break",
};

/** A plain-words sentence for the chat: no stack, no secrets, no raw server dump. */
export function userFacingLlmError(err: unknown): string {
  if (!(err instanceof LlmError)) {
    return "Sorry — something went wrong while talking to the language model. Please try again.";
  }
  const { provider, attempts } = err;
  if (err.partialText) {
    const why = err.kind in REASONS ? REASONS[err.kind as keyof typeof REASONS] : "the provider ended it";
    return `${err.partialText}\n\n(The answer broke off here: ${why}. Ask me to continue.)`;
  }
  switch (err.kind) {
    case "aborted":
      return "Stopped.";
    case "auth": {
      const where = provider
        ? `check providers.${provider}.apiKey (or PALAVER_PROVIDERS__${provider.toUpperCase()}__API_KEY in .env)`
        : "check the provider's apiKey in the config";
      return `Sorry — the language model provider rejected the API key; ${where}.`;
    }
    case "quota": {
      const which = provider ? `the ${provider} account` : "the provider account";
      return (
        `Sorry — ${which} behind the language model is out of credit (its quota is used up). ` +
        "Add credit or raise the limit on the provider's billing page; trying again before that will not help."
      );
    }
    case "bad_request": {
      const detail = err.detail ? ` (${err.detail})` : "";
      return (
        `Sorry — the language model refused the request${detail}. ` +
        "The model name may be wrong or the conversation too long; /new starts a fresh one."
      );
    }
    case "context_overflow":
      return (
        "Sorry — this conversation no longer fits in what the language model can read at once, " +
        "even with older parts left out, so I couldn't answer. /new starts a fresh conversation " +
        "(what we talked about is saved in memory first)."
      );
    case "rate_limit":
    case "server":
    case "network":
    case "timeout":
    case "invalid_response":
    case "unavailable": {
      const tries = attempts > 1 ? ` after ${attempts} attempts` : "";
      const later = err.kind === "rate_limit" ? "in a minute" : "in a moment";
      return `Sorry — I couldn't reach the language model (${REASONS[err.kind]})${tries}. Please try again ${later}.`;
    }
  }
}
