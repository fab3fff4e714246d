/**
 * The grammy Bot and what wraps every Bot API call: @grammyjs/auto-retry
 * (429 retry_after up to a bound, 5xx) and our transformer: long polls get a
 * deadline of their own (a dead connection must not hang polling) and tell
 * the watchdog they finished; other calls are retried a few times on
 * network errors. Live previews use an Api whose 429s are not retried
 * (`createPreviewApi`): a rate-limited edit is not worth sending again once
 * newer text exists, so live-preview.ts waits and sends the newest instead.
 */
import { Agent as HttpAgent } from "node:http";
import { Agent as HttpsAgent } from "node:https";
import { autoRetry } from "@grammyjs/auto-retry";
import { Api, Bot, HttpError, type ApiClientOptions, type Transformer } from "grammy";
import type { Logger } from "../../log.js";
import { backoffDelay, sleep } from "../../util/backoff.js";
import { ConfigError, errorMessage } from "../../util/errors.js";
import { deadlineSignal } from "../../util/timeout.js";
import type { TelegramConfig } from "../../config/platforms/telegram.js";
import type { TelegramTuning } from "./tuning.js";

export interface BotOptions {
  config: TelegramConfig;
  apiRoot: string;
  tuning: TelegramTuning;
  log: Logger;
  /** A getUpdates call finished (answered or failed): polling is alive. */
  onPoll(): void;
  /** What the calls go through (telegramAgent): the bot and its previews' Api share one pool. */
  agent: HttpAgent;
}

function clientOptions(opts: BotOptions): ApiClientOptions {
  return {
    apiRoot: opts.apiRoot,
    timeoutSeconds: opts.tuning.requestTimeoutSeconds,
    // grammy's fetch (node-fetch) takes a node Agent here, as grammY's proxy docs show; compress is
    // grammy's default, given again because this object replaces it.
    baseFetchConfig: { agent: opts.agent, compress: true },
  };
}

/**
 * The connections grammy's calls go through: a keep-alive pool of at most `maxSockets`
 * (platformConnections; more calls at once wait for one), tunnelled through channels.telegram.proxy
 * with CONNECT when it is set. Rejects with a ConfigError for a proxy URL it cannot use. The proxy
 * agent's package is imported only when a proxy is set: most installs have none, and it would
 * otherwise be loaded and kept in memory by every Telegram gateway.
 */
export async function telegramAgent(
  config: TelegramConfig,
  apiRoot: string,
  maxSockets = Infinity,
): Promise<HttpAgent> {
  const pool = { keepAlive: true, maxSockets };
  if (config.proxy) {
    const url = proxyUrl(config.proxy);
    const { HttpsProxyAgent } = await import("https-proxy-agent");
    return new HttpsProxyAgent(url, pool);
  }
  return apiRoot.startsWith("https:") ? new HttpsAgent(pool) : new HttpAgent(pool);
}

/** channels.telegram.proxy as a URL an HTTP CONNECT proxy agent takes (never echoed: it may hold a password). */
function proxyUrl(value: string): URL {
  const key = "channels.telegram.proxy";
  let url: URL;
  try {
    url = new URL(value);
  } catch (err) {
    throw new ConfigError(`${key} is not a URL such as http://127.0.0.1:7890`, [key], { cause: err });
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") {
    throw new ConfigError(
      `${key} must be an http:// proxy (CONNECT), or https:// for one reached over TLS; ${url.protocol}// proxies are not supported`,
      [key],
    );
  }
  return url;
}

export function createBot(opts: BotOptions): Bot {
  const { config, tuning } = opts;
  const bot = new Bot(config.token.trim(), { client: clientOptions(opts) });
  bot.api.config.use(
    autoRetry({
      maxRetryAttempts: 3,
      maxDelaySeconds: tuning.maxRateLimitWaitSeconds,
      rethrowHttpErrors: true,
    }),
  );
  bot.api.config.use(guard(opts));
  return bot;
}

/**
 * The same client for live previews: a 429 reaches the caller with its retry_after (live-preview.ts
 * waits and sends the newest text, not the stale one); a Telegram 5xx is still tried once more.
 */
export function createPreviewApi(opts: BotOptions): Api {
  const api = new Api(opts.config.token.trim(), clientOptions(opts));
  api.config.use(autoRetry({ maxDelaySeconds: 0, maxRetryAttempts: 1, rethrowHttpErrors: true }));
  api.config.use(guard(opts));
  return api;
}

function guard(opts: BotOptions): Transformer {
  const { tuning, log } = opts;
  return async (prev, method, payload, grammySignal) => {
    if (method === "getUpdates") {
      const pollSeconds = (payload as { timeout?: number }).timeout ?? 0;
      return following(grammySignal, async (signal) => {
        const deadline = deadlineSignal(pollSeconds * 1000 + tuning.pollGraceMs, signal);
        try {
          return await prev(method, payload, gs(deadline.signal));
        } finally {
          deadline.dispose();
          opts.onPoll();
        }
      });
    }
    for (let attempt = 0; ; attempt++) {
      try {
        return await prev(method, payload, grammySignal);
      } catch (err) {
        if (!(err instanceof HttpError) || grammySignal?.aborted || attempt >= tuning.networkRetries)
          throw err;
        const waitMs = backoffDelay(attempt, tuning.retryBaseMs / 2, 30_000);
        log.debug(
          { method, waitMs, err: errorMessage(err) },
          "Telegram call failed on the network; retrying",
        );
        await following(grammySignal, (signal) => sleep(waitMs, signal));
      }
    }
  };
}

/**
 * grammy hands transformers the signal of its own AbortController polyfill (its polling loop's),
 * which the native AbortSignal helpers do not accept. `run` gets a native signal that follows it;
 * made only where one is needed (a poll's deadline, a wait before a retry), not for every call.
 */
interface AnySignal {
  readonly aborted: boolean;
  addEventListener(type: "abort", listener: () => void, options?: { once: boolean }): void;
  removeEventListener(type: "abort", listener: () => void): void;
}

async function following<T>(
  signal: AnySignal | undefined,
  run: (native: AbortSignal | undefined) => Promise<T>,
): Promise<T> {
  if (!signal) return run(undefined);
  const controller = new AbortController();
  const abort = () => controller.abort();
  if (signal.aborted) controller.abort();
  else signal.addEventListener("abort", abort, { once: true });
  try {
    return await run(controller.signal);
  } finally {
    // The caller's signal often lives as long as the channel (typing, previews): a listener left
    // on it per call would pile up for as long as palaver runs.
    signal.removeEventListener("abort", abort);
  }
}

/** grammy's methods are typed with the polyfill's AbortSignal; a native one works the same at run time. */
export type GrammySignal = NonNullable<Parameters<Bot["api"]["getMe"]>[0]>;
export function gs(signal: AbortSignal): GrammySignal {
  return signal as unknown as GrammySignal;
}

/** Numeric chat ids as numbers, @channel names as they are. */
export function chatIdParam(chatId: string): number | string {
  return /^-?\d+$/.test(chatId) ? Number(chatId) : chatId;
}
