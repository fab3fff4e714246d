/**
 * One connection to Discord: a discord.js Client with only what palaver uses. The intents come
 * from the config; Partials.Channel lets a DM arrive on a channel the client has not cached
 * (discord.js drops such messages otherwise). Caches are bounded: palaver reads a message's
 * channel, the message a reply refers to and the members of an interaction, nothing more, so
 * everything else discord.js would keep (presences, reactions, emojis, voice states ...) is not
 * kept at all. The REST client is discord.js's own (its rate-limit queue and retries); its `api`
 * option is channels.discord.apiUrl, and the gateway address is asked from that API
 * (GET /gateway/bot), so apiUrl moves both.
 *
 * The gateway resumes and reconnects by itself; what it does is logged here. A close code it
 * does not recover from (bad token, refused intents) ends the connection: before ready it fails
 * `connect`, after it the bot stays offline until palaver restarts (and the log says why).
 */
import {
  Client,
  Events,
  Options,
  Partials,
  RESTEvents,
  type ClientOptions,
  type RateLimitData,
} from "discord.js";
import type { Logger } from "../../log.js";
import { ChannelError } from "../../util/errors.js";
import { TimeoutError, withTimeout } from "../../util/timeout.js";
import { describeCloseCode } from "./diagnostics.js";

/** 5xx and timeouts: one retry inside discord.js's REST client, then the outbox takes over (with its backoff). */
const REST_RETRIES = 1;
/** Messages kept per channel: enough for a reply's reference to be found without asking the API. */
const MESSAGES_PER_CHANNEL = 25;
const MAX_MEMBERS = 200;
const MAX_USERS = 1000;
/** How often, and after how long, cached messages are let go (seconds). */
const MESSAGE_SWEEP = { interval: 600, lifetime: 1800 };

export interface ConnectionOptions {
  token: string;
  intents: number;
  /** The API base (channels.discord.apiUrl); empty for Discord's own. */
  apiUrl: string;
  /** Whether a rate limit fails the call at once instead of being waited out in the REST queue. */
  rejectOnRateLimit: (limit: RateLimitData) => boolean;
  log: Logger;
}

export interface DiscordConnection {
  client: Client;
  token: string;
  /** What the handlers know: ready seen, stop() called, the last close code. */
  state: { ready: boolean; stopping: boolean; closeCode: number | null };
}

/** The client's options: pure, so what palaver asks of discord.js can be read in one place. */
export function clientOptions(opts: Omit<ConnectionOptions, "token" | "log">): ClientOptions {
  return {
    intents: opts.intents,
    partials: [Partials.Channel],
    makeCache: Options.cacheWithLimits({
      MessageManager: MESSAGES_PER_CHANNEL,
      GuildMemberManager: MAX_MEMBERS,
      UserManager: MAX_USERS,
      ThreadMemberManager: 0,
      PresenceManager: 0,
      ReactionManager: 0,
      ReactionUserManager: 0,
      VoiceStateManager: 0,
      GuildEmojiManager: 0,
      GuildStickerManager: 0,
      GuildScheduledEventManager: 0,
      GuildInviteManager: 0,
      GuildBanManager: 0,
      StageInstanceManager: 0,
      AutoModerationRuleManager: 0,
      ApplicationCommandManager: 0,
    }),
    sweepers: {
      ...Options.DefaultSweeperSettings,
      messages: MESSAGE_SWEEP,
    },
    rest: {
      ...(opts.apiUrl ? { api: opts.apiUrl.replace(/\/+$/, "") } : {}),
      retries: REST_RETRIES,
      rejectOnRateLimit: opts.rejectOnRateLimit,
    },
  };
}

export function openConnection(opts: ConnectionOptions): DiscordConnection {
  const connection: DiscordConnection = {
    client: new Client(clientOptions(opts)),
    token: opts.token,
    state: { ready: false, stopping: false, closeCode: null },
  };
  logLifecycle(connection, opts.log);
  return connection;
}

function logLifecycle({ client, token, state }: DiscordConnection, log: Logger): void {
  client.on(Events.ShardDisconnect, (event, shard) => {
    state.closeCode = event.code;
    if (!state.ready || state.stopping) return;
    const fatal = describeCloseCode(event.code);
    log.error(
      { shard, code: event.code },
      `${fatal ?? "Discord closed the gateway connection"}; the bot is offline until palaver restarts`,
    );
  });
  client.on(Events.ShardReconnecting, (shard) => {
    if (state.ready && !state.stopping) log.warn({ shard }, "Discord gateway connection lost; reconnecting");
  });
  client.on(Events.ShardResume, (shard) =>
    log.info({ shard }, "Discord gateway session resumed; missed events replayed"),
  );
  client.on(Events.ShardReady, (shard) => {
    if (state.ready) log.info({ shard }, "Discord gateway reconnected with a new session");
  });
  client.on(Events.ShardError, (err, shard) => log.warn({ err, shard }, "Discord gateway error"));
  client.on(Events.Debug, (message) => {
    const safe = withoutToken(message, token);
    if (safe !== null) log.trace(safe);
  });
  client.rest.on(RESTEvents.RateLimited, (info) =>
    log.info(
      { route: info.route, retryAfterMs: info.retryAfter, global: info.global },
      "Discord rate limit hit",
    ),
  );
  client.rest.on(RESTEvents.Debug, (message) => {
    const safe = withoutToken(message, token);
    if (safe !== null) log.trace(safe);
  });
}

/**
 * A debug line of discord.js fit for the log: null for the line that shows the token (discord.js
 * censors only its last part, and a token of another shape not at all); the token cut out of any
 * other line, should one ever carry it.
 */
export function withoutToken(message: string, token: string): string | null {
  if (/provided token/i.test(message)) return null;
  return token ? message.split(token).join("[token]") : message;
}

/**
 * Logs in, connects and waits for ready. Rejects with the gateway's error when it closes with a
 * code it does not recover from (4004, 4014 ...): discord.js would otherwise stay disconnected and
 * never get ready.
 */
export async function connect(
  { client, token, state }: DiscordConnection,
  signal: AbortSignal,
  timeoutMs: number,
): Promise<Client<true>> {
  const cancelled = () => new ChannelError("start cancelled", { cause: signal.reason });
  if (signal.aborted) throw cancelled();
  let onReady: ((ready: Client<true>) => void) | undefined;
  let onDisconnect: ((event: { code: number }) => void) | undefined;
  const ready = new Promise<Client<true>>((resolve, reject) => {
    onReady = resolve;
    onDisconnect = ({ code }) => reject(new Error(`Discord closed the gateway connection (code ${code})`));
    client.once(Events.ClientReady, onReady);
    client.on(Events.ShardDisconnect, onDisconnect);
    client.login(token).catch(reject);
  });
  try {
    const me = await withTimeout(ready, timeoutMs, "connecting to Discord", signal);
    state.ready = true;
    return me;
  } catch (err) {
    if (signal.aborted) throw cancelled();
    if (err instanceof TimeoutError)
      throw new ChannelError(`Discord did not get ready within ${Math.round(timeoutMs / 1000)} s`, {
        cause: err,
      });
    throw err;
  } finally {
    if (onReady) client.off(Events.ClientReady, onReady);
    if (onDisconnect) client.off(Events.ShardDisconnect, onDisconnect);
  }
}

/** Closes the gateway (code 1000: the session ends) and stops the client's sweepers and REST timers. */
export async function closeConnection({ client, state }: DiscordConnection): Promise<void> {
  state.stopping = true;
  try {
    await client.destroy();
  } finally {
    client.rest.clearHashSweeper();
    client.rest.clearHandlerSweeper();
  }
}
