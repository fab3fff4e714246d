/**
 * One connection to Discord: @discordjs/rest for the API, @discordjs/ws for
 * the gateway, and @discordjs/core's Client on top (typed API calls, gateway
 * dispatches as events). The gateway address comes from the API
 * (GET /gateway/bot through the same REST client), so apiUrl moves both.
 *
 * The gateway resumes and reconnects by itself; what it does is logged here.
 * A close code it does not recover from (bad token, refused intents) ends the
 * connection: before READY it fails `connect`, after it the bot stays offline
 * until palaver restarts (and the log says why).
 */
import { Client, type GatewayReadyDispatchData } from "@discordjs/core";
import { REST, RESTEvents, type RateLimitData, type RESTOptions } from "@discordjs/rest";
import { WebSocketManager, WebSocketShardEvents, type SessionInfo } from "@discordjs/ws";
import type { Logger } from "../../log.js";
import { ChannelError } from "../../util/errors.js";
import { TimeoutError, withTimeout } from "../../util/timeout.js";
import { describeCloseCode } from "./diagnostics.js";

/** 5xx and timeouts: one retry inside @discordjs/rest, then the outbox takes over (with its backoff). */
const REST_RETRIES = 1;

export interface ConnectionOptions {
  token: string;
  intents: number;
  /** The API base (channels.discord.apiUrl); empty for Discord's own. */
  apiUrl: string;
  /** Whether a rate limit fails the call at once instead of being waited out in the REST queue. */
  rejectOnRateLimit: (limit: RateLimitData) => boolean;
  log: Logger;
  /** What REST calls go through (pooledFetch): not the built-in fetch, whose first use loads undici. */
  fetch?: typeof fetch;
}

export interface DiscordConnection {
  client: Client;
  rest: REST;
  gateway: WebSocketManager;
  /** What the handlers know: READY seen, stop() called, the last close code. */
  state: { ready: boolean; stopping: boolean; closeCode: number | null };
}

export function openConnection(opts: ConnectionOptions): DiscordConnection {
  const rest = new REST({
    ...(opts.apiUrl ? { api: opts.apiUrl.replace(/\/+$/, "") } : {}),
    retries: REST_RETRIES,
    rejectOnRateLimit: opts.rejectOnRateLimit,
    ...(opts.fetch ? { makeRequest: opts.fetch as unknown as RESTOptions["makeRequest"] } : {}),
  }).setToken(opts.token);
  // Sessions kept per connection, not in @discordjs/ws's process-wide default store: another
  // connection (a restart, a second channel in tests) must not try to resume this one's session.
  const sessions = new Map<number, SessionInfo>();
  const gateway = new WebSocketManager({
    token: opts.token,
    intents: opts.intents,
    rest,
    // palaver runs one shard: a bot big enough to need more is told so by close 4011.
    shardCount: 1,
    retrieveSessionInfo: (shardId) => sessions.get(shardId) ?? null,
    updateSessionInfo: (shardId, info) => {
      if (info) sessions.set(shardId, info);
      else sessions.delete(shardId);
    },
  });
  const connection: DiscordConnection = {
    client: new Client({ rest, gateway }),
    rest,
    gateway,
    state: { ready: false, stopping: false, closeCode: null },
  };
  logLifecycle(connection, opts.log);
  return connection;
}

function logLifecycle({ rest, gateway, state }: DiscordConnection, log: Logger): void {
  gateway.on(WebSocketShardEvents.Closed, (code, shard) => {
    state.closeCode = code;
    if (!state.ready || state.stopping) return;
    const fatal = describeCloseCode(code);
    if (fatal) log.error({ shard, code }, `${fatal}; the bot is offline until palaver restarts`);
    else log.warn({ shard, code }, "Discord gateway connection lost; reconnecting");
  });
  gateway.on(WebSocketShardEvents.Resumed, (shard) =>
    log.info({ shard }, "Discord gateway session resumed; missed events replayed"),
  );
  gateway.on(WebSocketShardEvents.Ready, (_data, shard) => {
    if (state.ready) log.info({ shard }, "Discord gateway reconnected with a new session");
  });
  gateway.on(WebSocketShardEvents.Error, (err, shard) => log.warn({ err, shard }, "Discord gateway error"));
  gateway.on(WebSocketShardEvents.SocketError, (err, shard) =>
    log.debug({ err, shard }, "Discord gateway socket error"),
  );
  gateway.on(WebSocketShardEvents.Debug, (message, shard) => log.trace({ shard }, message));
  rest.on(RESTEvents.RateLimited, (info) =>
    log.info(
      { route: info.route, retryAfterMs: info.retryAfter, global: info.global },
      "Discord rate limit hit",
    ),
  );
  rest.on(RESTEvents.Debug, (message) => log.trace(message));
}

/**
 * Asks the API for the gateway, connects and waits for READY. Rejects with the gateway's error when
 * it closes with a code it does not recover from (4004, 4014 ...): @discordjs/ws would otherwise
 * stay idle and never resolve.
 */
export async function connect(
  { gateway, state }: DiscordConnection,
  signal: AbortSignal,
  timeoutMs: number,
): Promise<GatewayReadyDispatchData> {
  const cancelled = () => new ChannelError("start cancelled", { cause: signal.reason });
  if (signal.aborted) throw cancelled();
  let onReady: ((data: GatewayReadyDispatchData) => void) | undefined;
  let onError: ((err: Error) => void) | undefined;
  let onClosed: ((code: number) => void) | undefined;
  const ready = new Promise<GatewayReadyDispatchData>((resolve, reject) => {
    onReady = resolve;
    onError = reject;
    onClosed = (code) => {
      if (describeCloseCode(code)) reject(new Error(`Discord closed the gateway connection (code ${code})`));
    };
    gateway.once(WebSocketShardEvents.Ready, onReady);
    gateway.on(WebSocketShardEvents.Error, onError);
    gateway.on(WebSocketShardEvents.Closed, onClosed);
    gateway.connect().catch(reject);
  });
  try {
    const data = await withTimeout(ready, timeoutMs, "connecting to Discord", signal);
    state.ready = true;
    return data;
  } catch (err) {
    if (signal.aborted) throw cancelled();
    if (err instanceof TimeoutError)
      throw new ChannelError(`Discord did not get ready within ${Math.round(timeoutMs / 1000)} s`, {
        cause: err,
      });
    throw err;
  } finally {
    if (onReady) gateway.off(WebSocketShardEvents.Ready, onReady);
    if (onError) gateway.off(WebSocketShardEvents.Error, onError);
    if (onClosed) gateway.off(WebSocketShardEvents.Closed, onClosed);
  }
}

/** Closes the gateway (code 1000: the session ends) and stops the REST client's sweepers. */
export async function closeConnection({ rest, gateway, state }: DiscordConnection): Promise<void> {
  state.stopping = true;
  try {
    await gateway.destroy();
  } finally {
    rest.clearHashSweeper();
    rest.clearHandlerSweeper();
  }
}
