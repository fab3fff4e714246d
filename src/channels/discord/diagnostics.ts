/**
 * What went wrong with Discord, in plain words and with the fix. Pure: the
 * adapter passes in what discord.js reported (an
 * error, a gateway close code).
 */
import { errorMessage } from "../../util/errors.js";

const INTENT = { guilds: 1, guildMessages: 512, directMessages: 4096, messageContent: 32768 } as const;

const BAD_TOKEN =
  "Discord rejected the bot token. Check channels.discord.token: in the Developer Portal open " +
  "your application → Bot → Reset Token, and paste the new token (without a 'Bot ' prefix).";
const DISALLOWED_INTENTS =
  "Discord refused the Message Content intent (gateway close 4014). In the Developer Portal open " +
  "your application → Bot → Privileged Gateway Intents and turn on Message Content Intent; or drop " +
  "32768 from channels.discord.intents, and the bot will only see DMs and messages that mention it.";
const INVALID_INTENTS =
  "Discord says channels.discord.intents is not a valid intents value (gateway close 4013); " +
  "remove the key to use the default 37377.";

/** A gateway close code that discord.js does not recover from, explained; null for the others. */
export function describeCloseCode(code: number): string | null {
  switch (code) {
    case 4004:
      return `${BAD_TOKEN} (gateway close 4004)`;
    case 4013:
      return INVALID_INTENTS;
    case 4014:
      return DISALLOWED_INTENTS;
    case 4010:
    case 4011:
      return `Discord wants this bot sharded (gateway close ${code}); palaver runs one shard only.`;
    case 4012:
      return "Discord rejected the gateway API version (gateway close 4012).";
    default:
      return null;
  }
}

/** Why login failed, for the log line of the channel manager (which then retries with backoff). */
export function describeConnectError(err: unknown, closeCode: number | null, apiUrl: string): string {
  if (closeCode !== null) {
    const byCode = describeCloseCode(closeCode);
    if (byCode) return byCode;
  }
  const message = errorMessage(err);
  const code = errorCode(err);
  const status = (err as { status?: unknown } | null)?.status;
  // The API's 401 comes from GET /gateway/bot, before the gateway is touched: discord.js's login
  // turns it into its TokenInvalid error.
  if (status === 401 || code === "TokenInvalid") return `${BAD_TOKEN} (HTTP 401 from the API)`;
  // The gateway's errors for the close codes it does not recover from, should the code be missed.
  if (message === "Authentication failed") return `${BAD_TOKEN} (gateway close 4004)`;
  if (message === "Used disallowed intents") return DISALLOWED_INTENTS;
  if (message === "Used invalid intents") return INVALID_INTENTS;
  const network = errorCode((err as { cause?: unknown } | null)?.cause) ?? code;
  if (network && /^(ECONNREFUSED|ENOTFOUND|EAI_AGAIN|ETIMEDOUT|ECONNRESET|UND_ERR_\w+)$/.test(network)) {
    return `Could not reach Discord at ${apiUrl || "https://discord.com/api"} (${network}); will retry.`;
  }
  return `Could not connect to Discord: ${message}`;
}

function errorCode(err: unknown): string | undefined {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === "string" ? code : undefined;
}

/** Configuration mistakes in channels.discord.intents worth a warning at startup. */
export function intentWarnings(intents: number): string[] {
  const warnings: string[] = [];
  if (!(intents & INTENT.guilds))
    warnings.push("channels.discord.intents lacks Guilds (1): server channels and threads will not be known");
  if (!(intents & INTENT.guildMessages))
    warnings.push("channels.discord.intents lacks GuildMessages (512): messages in servers will not arrive");
  if (!(intents & INTENT.directMessages))
    warnings.push("channels.discord.intents lacks DirectMessages (4096): DMs will not arrive");
  if (!(intents & INTENT.messageContent))
    warnings.push(
      "channels.discord.intents lacks MessageContent (32768): only DMs and messages that mention the bot carry text",
    );
  return warnings;
}
