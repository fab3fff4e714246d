/**
 * Webhook mode: a small node:http server Telegram posts updates to. Every
 * request must carry the secret token; the body is bounded in size and time;
 * a valid update is handed to grammy and always answered 200 (anything else
 * makes Telegram resend the same update again and again).
 */
import { randomBytes, timingSafeEqual } from "node:crypto";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import type { Bot } from "grammy";
import * as z from "zod";
import type { Logger } from "../../log.js";
import { ChannelError, errorMessage } from "../../util/errors.js";
import { HttpError, readBody } from "../../util/http-body.js";
import { settleWithin } from "../../util/timeout.js";
import { gs } from "./api.js";
import type { TelegramConfig } from "../../config/platforms/telegram.js";
import { ALLOWED_UPDATES } from "./polling.js";

const MAX_BODY = 1024 * 1024;
const BODY_TIMEOUT_MS = 10_000;

/** The part of an update the webhook checks before handing it to grammy. */
const UpdateEnvelope = z.looseObject({ update_id: z.number().int().nonnegative() });

export class WebhookServer {
  private server: Server | null = null;

  constructor(
    private readonly bot: Bot,
    private readonly config: TelegramConfig,
    private readonly log: Logger,
  ) {}

  /** Where the server listens (tests use port 0). */
  get address(): AddressInfo | null {
    const address = this.server?.address();
    return address && typeof address === "object" ? address : null;
  }

  /** Listens, then tells Telegram where to post. */
  async start(signal: AbortSignal): Promise<void> {
    const { webhook } = this.config;
    // Telegram sends the secret back on every request; without one configured, a fresh one per start.
    const secret = webhook.secretToken || randomBytes(24).toString("hex");
    const server = createServer((req, res) => void this.onRequest(req, res, secret));
    this.server = server;
    await new Promise<void>((resolve, reject) => {
      server.once("error", (err) =>
        reject(
          new ChannelError(
            `cannot listen on ${webhook.host}:${webhook.port} for the Telegram webhook: ${errorMessage(err)}`,
            { cause: err },
          ),
        ),
      );
      server.listen(webhook.port, webhook.host, () => resolve());
    });
    server.on("error", (err) => this.log.error({ err }, "Telegram webhook server error"));
    await this.bot.api.setWebhook(
      webhook.url,
      {
        secret_token: secret,
        drop_pending_updates: this.config.dropPendingUpdates,
        allowed_updates: [...ALLOWED_UPDATES],
      },
      gs(signal),
    );
  }

  async close(timeoutMs: number): Promise<void> {
    const server = this.server;
    if (!server) return;
    this.server = null;
    await settleWithin(new Promise<void>((resolve) => server.close(() => resolve())), timeoutMs);
    server.closeAllConnections();
  }

  private async onRequest(req: IncomingMessage, res: ServerResponse, secret: string): Promise<void> {
    const reply = (status: number, body = "") => {
      if (!res.headersSent) res.writeHead(status, { "content-type": "text/plain" }).end(body);
    };
    try {
      const path = new URL(req.url ?? "/", "http://localhost").pathname;
      if (path !== this.config.webhook.path) return reply(404, "not found");
      if (req.method !== "POST") return reply(405, "method not allowed");
      const given = req.headers["x-telegram-bot-api-secret-token"];
      if (typeof given !== "string" || !sameSecret(given, secret)) {
        this.log.warn(
          { remote: req.socket.remoteAddress },
          "webhook request with a wrong secret token refused",
        );
        return reply(401, "unauthorized");
      }
      const body = await readBody(req, MAX_BODY, BODY_TIMEOUT_MS);
      let parsed: unknown;
      try {
        parsed = JSON.parse(body.toString("utf8"));
      } catch {
        return reply(400, "not JSON");
      }
      const update = UpdateEnvelope.safeParse(parsed);
      if (!update.success) return reply(400, "not a Telegram update");
      // Our handler only hands the message to the inbound path, so this is quick.
      try {
        await this.bot.handleUpdate(update.data);
      } catch (err) {
        this.log.error({ err }, "handling a Telegram webhook update failed");
      }
      reply(200, "ok");
    } catch (err) {
      if (err instanceof HttpError) {
        // Too large or too slow: answered, and the rest of the body is not read.
        res.setHeader("connection", "close");
        return reply(err.status, err.message);
      }
      this.log.warn({ err }, "webhook request failed");
      reply(400, "bad request");
    }
  }
}

function sameSecret(given: string, expected: string): boolean {
  const a = Buffer.from(given);
  const b = Buffer.from(expected);
  return a.length === b.length && timingSafeEqual(a, b);
}
