/**
 * What the person is told when the language model fails: one sentence that names the provider,
 * the address, what happened and the setting that fixes it; "try again" only where waiting helps
 * (rate limits, server errors, time-outs). The same words reach the terminal, the web chat and
 * every platform (the agent loop sends them as the reply). No stack, no secrets.
 */
import { LlmError, type LlmErrorKind } from "../util/errors.js";
import { connectionCode } from "./classify-error.js";

/** The reason an answer broke off half-way, in a few words. */
const BROKE_OFF: Partial<Record<LlmErrorKind, string>> = {
  rate_limit: "rate limited by the provider",
  server: "the provider had a server error",
  network: "the connection failed",
  timeout: "it took too long to answer",
  invalid_response: "it sent an answer I could not read",
};

/** Kinds where no answer came back at all (the others are answers that said no). */
const UNREACHED: ReadonlySet<LlmErrorKind> = new Set([
  "network",
  "timeout",
  "rate_limit",
  "server",
  "invalid_response",
  "unavailable",
]);

/** A plain-words sentence for the chat: no stack, no secrets, no raw server dump. */
export function userFacingLlmError(err: unknown): string {
  if (!(err instanceof LlmError)) {
    return "Sorry — something went wrong while talking to the language model. Please try again.";
  }
  if (err.partialText) {
    const why = BROKE_OFF[err.kind] ?? "the provider ended it";
    return `${err.partialText}\n\n(The answer broke off here: ${why}. Ask me to continue.)`;
  }
  if (err.kind === "aborted") return "Stopped.";
  const sentence = llmFailureSentence(err);
  return UNREACHED.has(err.kind)
    ? `Sorry — I couldn't reach the language model: ${sentence}`
    : `Sorry — ${sentence}`;
}

/** "provider custom (http://…/v1)", or as much of it as is known. */
function who(err: LlmError): string {
  const name = err.provider ? `provider ${err.provider}` : "the language model provider";
  return err.url ? `${name} (${err.url})` : name;
}

/** The config key of the provider's address / key, for "set X". */
function setting(err: LlmError, key: "apiBase" | "apiKey"): string {
  return err.provider ? `providers.${err.provider}.${key}` : `the provider's ${key} in the config`;
}

function afterTries(err: LlmError): string {
  return err.attempts > 1 ? ` (${err.attempts} attempts)` : "";
}

/** What happened and what fixes it, one sentence. */
function llmFailureSentence(err: LlmError): string {
  const tries = afterTries(err);
  switch (err.kind) {
    case "aborted":
      return "the call to the language model was stopped.";
    case "auth": {
      const env = err.provider
        ? ` (or PALAVER_PROVIDERS__${err.provider.toUpperCase()}__API_KEY in .env)`
        : "";
      return (
        `${who(err)} rejected the API key (HTTP ${err.status ?? 401}). ` +
        `Set a valid key in ${setting(err, "apiKey")}${env}.`
      );
    }
    case "quota": {
      const which = err.provider ? `the ${err.provider} account` : "the provider account";
      return (
        `${which} behind the language model is out of credit (its quota is used up). ` +
        "Add credit or raise the limit on the provider's billing page; trying again before that will not help."
      );
    }
    case "bad_request":
      return badRequest(err);
    case "context_overflow":
      return (
        "this conversation no longer fits in what the language model can read at once, " +
        "even with older parts left out, so I couldn't answer. /new starts a fresh conversation " +
        "(what we talked about is saved in memory first)."
      );
    case "network":
      return network(err);
    case "timeout":
      return (
        `${who(err)} did not answer in time${tries}. Please try again in a moment; ` +
        "a slow local model may need a larger agents.defaults.llm.timeout."
      );
    case "rate_limit":
      return `${who(err)} is rate limiting (HTTP 429)${tries}. Please try again in a minute.`;
    case "server":
      return `${who(err)} had a server error${err.status ? ` (HTTP ${err.status})` : ""}${tries}. Please try again in a moment.`;
    case "invalid_response":
      return `${who(err)} sent an answer I could not read${tries}. Please try again in a moment; if it keeps happening, check that ${setting(err, "apiBase")} is an OpenAI-compatible API (it usually ends in /v1).`;
    case "unavailable":
      return "it has been failing, so I'm giving it a short break. Please try again in a moment.";
  }
}

function badRequest(err: LlmError): string {
  const detail = err.detail ? `: ${err.detail}` : "";
  if (err.status === 404) {
    const model = err.model ? `the model "${err.model}"` : "the model";
    return (
      `${who(err)} does not know ${model} or the address (HTTP 404${detail}). ` +
      `Set agents.defaults.model to a model it serves, and check ${setting(err, "apiBase")} (it usually ends in /v1).`
    );
  }
  return (
    `${who(err)} refused the request${err.status ? ` (HTTP ${err.status}${detail})` : detail}. ` +
    "The model name (agents.defaults.model) may be wrong or the conversation too long; /new starts a fresh one."
  );
}

/** A connection that failed, by the system's code: most are a wrong address, not a busy server. */
function network(err: LlmError): string {
  const code = connectionCode(err) ?? "";
  const base = setting(err, "apiBase");
  switch (code) {
    case "ECONNREFUSED":
      return `${who(err)} refused the connection (nothing listens there). Start the model server, or set ${base} to where it listens.`;
    case "ENOTFOUND":
    case "EAI_AGAIN":
    case "EAI_NONAME":
      return `the host name of ${who(err)} does not resolve (DNS). Check ${base} for a typo.`;
    case "BAD_PORT":
      return `${who(err)} uses a port that fetch refuses to connect to. Set ${base} to the model server's real port.`;
    case "EHOSTUNREACH":
    case "ENETUNREACH":
      return `${who(err)} cannot be reached from this machine (${code}). Check ${base} and the network.`;
    default:
      if (code && isTlsCode(code)) {
        return `the secure connection (TLS) to ${who(err)} failed (${code}). Check ${base}: http:// or https://, and the server's certificate.`;
      }
      return (
        `the connection to ${who(err)} failed${code ? ` (${code})` : ""}${afterTries(err)}. ` +
        `Please try again in a moment; if it keeps failing, check ${base}.`
      );
  }
}

function isTlsCode(code: string): boolean {
  return /^(ERR_TLS|ERR_SSL|CERT_|UNABLE_TO_|DEPTH_ZERO|SELF_SIGNED|EPROTO$)/.test(code);
}
