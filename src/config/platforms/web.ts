/**
 * channels.web: the browser chat served by the gateway's own HTTP server. The token is the
 * credential, so whoever holds it talks as one fixed sender, WEB_SENDER_ID.
 */
import * as z from "zod";
import { channelBase, idList } from "./common.js";

/** The sender id of every message from the page: the token holder is the owner. */
export const WEB_SENDER_ID = "owner";

/** The shortest token accepted in the config: anything shorter can be guessed. */
const MIN_TOKEN_CHARS = 16;

export const WebConfigSchema = z
  .object({
    ...channelBase,
    enabled: z
      .boolean()
      .optional()
      .describe("Serve the chat page on the gateway's address. Unset: on when no other platform is enabled."),
    allowFrom: idList
      .default([WEB_SENDER_ID])
      .describe(`Whoever holds the token is the sender "${WEB_SENDER_ID}"; [] shuts the page's chats.`),
    token: z
      .string()
      .default("")
      .describe("The page's password; empty: a random one kept in <state>/web/token (0600)."),
    trustProxy: z
      .boolean()
      .default(false)
      .describe(
        "A reverse proxy in front sets X-Forwarded-Host, -Proto and -For: believe them. Off: they are ignored, " +
          "since any client can send them.",
      ),
    uploadsPerMinute: z
      .number()
      .int()
      .positive()
      .default(30)
      .describe("Uploads a minute from one client address."),
    uploadQuotaBytes: z
      .number()
      .int()
      .positive()
      .default(200 * 1024 * 1024)
      .describe(
        "Total size of uploads kept but not yet sent with a message; unsent ones are deleted after an hour.",
      ),
  })
  .transform((c) => ({
    // undefined until the channels section resolves it (withWebDefault, below).
    enabled: c.enabled,
    allowFrom: c.allowFrom,
    admins: c.admins,
    ...(c.streaming !== undefined ? { streaming: c.streaming } : {}),
    ...(c.streamIntervalMs !== undefined ? { streamIntervalMs: c.streamIntervalMs } : {}),
    token: c.token,
    trustProxy: c.trustProxy,
    uploadsPerMinute: c.uploadsPerMinute,
    uploadQuotaBytes: c.uploadQuotaBytes,
  }));

export type WebConfig = z.output<typeof WebConfigSchema>;

/** Settings of an enabled section that cannot work, in plain words with their config path. */
export function webProblems(config: WebConfig): string[] {
  const token = config.token.trim();
  if (token !== "" && token.length < MIN_TOKEN_CHARS) {
    return [
      `channels.web.token is ${token.length} characters long: use at least ${MIN_TOKEN_CHARS} random ones ` +
        "(or leave it empty for a generated one)",
    ];
  }
  return [];
}

/**
 * The channels section with channels.web.enabled decided: as written, or, when unset, on exactly
 * when no other platform is enabled, so `npm start` on a fresh machine is a working assistant.
 * Resolved once, when the config is parsed, so the gateway, reloads, `config check`, `status` and
 * cron all see the same answer.
 */
export function withWebDefault<C extends { web: WebConfig }>(
  channels: C,
): Omit<C, "web"> & { web: WebConfig & { enabled: boolean } } {
  const others = Object.entries(channels).filter(([name]) => name !== "web");
  const otherEnabled = others.some(
    ([, section]) => typeof section === "object" && section !== null && section.enabled === true,
  );
  return { ...channels, web: { ...channels.web, enabled: channels.web.enabled ?? !otherEnabled } };
}
