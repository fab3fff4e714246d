/**
 * The LLM asked one tiny question through the openai client, as the gateway would ask it, timed;
 * the Date header of its answer also tells whether this machine's clock is off (TLS, cron times
 * and tokens with an expiry all suffer from a wrong clock).
 */
import type { Config } from "../config/schema.js";
import { resolveProvider } from "../llm/providers.js";
import { errorMessage } from "../util/errors.js";
import { fail, ok, warn, type CheckResult } from "./types.js";

const TIMEOUT_MS = 30_000;
/** More skew than this breaks TLS certificates' and tokens' time checks in practice. */
const MAX_SKEW_MS = 60_000;

export async function llmChecks(config: Config, now: () => number = Date.now): Promise<CheckResult[]> {
  let route;
  try {
    route = resolveProvider(config);
  } catch (err) {
    return [
      fail(
        "llm",
        errorMessage(err),
        "set a provider's apiKey (or apiBase for a local server); `palaver status` shows what palaver sees",
      ),
    ];
  }
  // Imported here: every palaver command loads this file, and only doctor needs the SDK.
  const { default: OpenAI } = await import("openai");
  const client = new OpenAI({
    baseURL: route.baseURL,
    apiKey: route.apiKey || "no-key",
    organization: null,
    project: null,
    defaultHeaders: route.extraHeaders,
    maxRetries: 0,
    timeout: TIMEOUT_MS,
  });
  const started = now();
  try {
    const { response } = await client.chat.completions
      .create({ model: route.model, messages: [{ role: "user", content: "Say OK." }], max_tokens: 5 })
      .withResponse();
    const latency = now() - started;
    const results = [ok("llm", `${route.name} ${route.model} at ${route.baseURL} answered in ${latency} ms`)];
    results.push(clockCheck(response.headers.get("date"), started, now()));
    return results;
  } catch (err) {
    return [
      fail(
        "llm",
        `${route.name} ${route.model} at ${route.baseURL}: ${errorMessage(err)}`,
        `check that ${route.baseURL} is reachable from here, providers.${route.name}.apiKey and agents.defaults.model`,
      ),
    ];
  }
}

/** Pure: the server's Date header against the local clock at the time of the call (±1 s of header precision). */
function clockCheck(dateHeader: string | null, sentAt: number, receivedAt: number): CheckResult {
  const server = dateHeader ? Date.parse(dateHeader) : NaN;
  if (Number.isNaN(server)) return ok("clock", "the LLM's answer had no Date header to compare with");
  const local = (sentAt + receivedAt) / 2;
  const skew = server - local;
  const slack = (receivedAt - sentAt) / 2 + 1000;
  if (Math.abs(skew) <= MAX_SKEW_MS + slack) return ok("clock", `within a minute of the LLM server's clock`);
  return warn(
    "clock",
    `this machine's clock is ${Math.round(Math.abs(skew) / 1000)} s ${skew > 0 ? "behind" : "ahead of"} the LLM server's`,
    "turn on time synchronisation (`timedatectl set-ntp true`, or install chrony)",
  );
}
