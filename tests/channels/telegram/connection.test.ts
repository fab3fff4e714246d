/** Connecting to Telegram: errors in plain words, retries, the polling watchdog, webhook mode. */
import { createServer, request } from "node:http";
import { connect, createServer as createNetServer, type AddressInfo, type Socket } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { FakeTelegram } from "../../fakes/telegram-server.js";
import { captureLog } from "../../helpers/log.js";
import { rig, type Rig } from "./helpers.js";

let r: Rig | undefined;
afterEach(async () => {
  await r?.cleanup();
  r = undefined;
});

describe("start errors in plain words (start rejects, the manager logs and retries)", () => {
  it("401: the token was rejected", async () => {
    const fake = await FakeTelegram.start();
    fake.token = "999:another-token"; // the bot's token is no longer valid
    r = await rig({ fake, config: { token: "123456789:AAFakeTokenForTestsOnly_abcdefghijklmn" } });
    await expect(r.start()).rejects.toThrow(
      "the Telegram bot token was rejected (check channels.telegram.token)",
    );
  });

  it("409: another instance is polling", async () => {
    r = await rig();
    r.fake.failNext("getUpdates", {
      code: 409,
      description:
        "Conflict: terminated by other getUpdates request; make sure that only one bot instance is running",
    });
    await expect(r.start()).rejects.toThrow(
      "another instance is polling with this token (stop the other palaver/nanobot, or use webhook mode)",
    );
    expect(r.channel.bot.isRunning()).toBe(false);
    // The manager's next attempt works once the other instance is gone.
    await r.start();
    r.fake.userMessage({ text: "second attempt" });
    expect((await r.nthInbound(1)).content).toBe("second attempt");
  });

  it("an unreachable Bot API: start gives up after its timeout, naming the address", async () => {
    const closed = createNetServer();
    await new Promise<void>((resolve) => closed.listen(0, "127.0.0.1", resolve));
    const { port } = closed.address() as AddressInfo;
    await new Promise<void>((resolve) => closed.close(() => resolve()));
    r = await rig({ config: { apiRoot: `http://127.0.0.1:${port}` }, tuning: { startTimeoutMs: 400 } });
    await expect(r.start()).rejects.toThrow(
      `no answer from the Telegram Bot API at http://127.0.0.1:${port}`,
    );
  });

  it("the constructor names a missing token or webhook URL", async () => {
    await expect(rig({ config: { token: "" } })).rejects.toThrow(/channels\.telegram\.token is empty/);
    await expect(rig({ config: { mode: "webhook" } })).rejects.toThrow(
      /channels\.telegram\.webhook\.url is empty/,
    );
  });
});

describe("while running", () => {
  it("keeps polling after a 409 mid-run, reporting it in plain words", async () => {
    const { log, lines } = captureLog();
    r = await rig({ log });
    await r.start();
    r.fake.failNext("getUpdates", {
      code: 409,
      description: "Conflict: terminated by other getUpdates request",
    });
    r.fake.userMessage({ text: "after the conflict" });
    expect((await r.nthInbound(1, 5000)).content).toBe("after the conflict");
    await r.fake.waitFor(
      () => lines.find((l) => l.msg?.includes("another instance is polling")),
      3000,
      "the log line",
    );
  });

  it("429 on getUpdates: waits retry_after, then goes on", async () => {
    r = await rig();
    await r.start();
    r.fake.failNext("getUpdates", {
      code: 429,
      description: "Too Many Requests: retry after 1",
      retryAfter: 1,
    });
    r.fake.userMessage({ text: "rate limited" });
    expect((await r.nthInbound(1, 5000)).content).toBe("rate limited");
    // The next getUpdates waited out retry_after: one sent sooner would have met another 429.
    expect(r.fake.callsTo("getUpdates").length).toBeGreaterThan(1);
    expect(r.fake.earlyRetries).toEqual([]);
  });

  it("the watchdog restarts polling that went silent (a connection that never answers)", async () => {
    const { log, lines } = captureLog();
    // A long poll's own deadline is far away: only the watchdog can notice.
    r = await rig({ log, tuning: { watchdogMs: 400, pollGraceMs: 60_000 } });
    await r.start();
    const startsBefore = r.fake.callsTo("deleteWebhook").length;
    r.fake.hangGetUpdates = true;
    const callsBefore = r.fake.callsTo("getUpdates").length;
    await r.fake.waitFor(
      () => r!.fake.callsTo("getUpdates").length > callsBefore,
      3000,
      "a hanging getUpdates",
    );
    r.fake.hangGetUpdates = false;
    r.fake.userMessage({ text: "are you there?" });
    expect((await r.nthInbound(1, 5000)).content).toBe("are you there?");
    expect(r.fake.callsTo("deleteWebhook").length).toBeGreaterThan(startsBefore);
    expect(lines.some((l) => l.msg === "Telegram polling has gone silent; restarting it")).toBe(true);
  });

  it("recovers when the server drops the polling connection", async () => {
    r = await rig();
    await r.start();
    r.fake.dropNext("getUpdates");
    const callsBefore = r.fake.callsTo("getUpdates").length;
    await r.fake.waitFor(
      () => r!.fake.callsTo("getUpdates").length > callsBefore,
      3000,
      "the dropped getUpdates",
    );
    r.fake.userMessage({ text: "back online" });
    expect((await r.nthInbound(1, 8000)).content).toBe("back online");
  });

  it("confirms handled updates when stopping, so a restart does not deliver them again", async () => {
    r = await rig();
    await r.start();
    r.fake.userMessage({ text: "once" });
    await r.nthInbound(1);
    await r.channel.stop();
    expect(r.fake.pendingUpdates).toBe(0);
    expect(r.channel.bot.isRunning()).toBe(false);
  });
});

describe("network", () => {
  it("retries a send whose connection dropped", async () => {
    r = await rig();
    await r.start();
    r.fake.dropNext("sendMessage", 2);
    await r.channel.send({ channel: "telegram", chatId: "42", content: "third time lucky" });
    expect(r.fake.callsTo("sendMessage")).toHaveLength(3);
    expect(r.fake.sent.map((m) => m.text)).toEqual(["third time lucky"]);
  });

  it("gives up on a send after a few network failures, saying where it could not reach", async () => {
    r = await rig({ tuning: { networkRetries: 1 } });
    await r.start();
    r.fake.dropNext("sendMessage", 5);
    const failed = r.channel.send({ channel: "telegram", chatId: "42", content: "x" });
    await expect(failed).rejects.toThrow(`cannot reach the Telegram Bot API at ${r.fake.apiRoot}`);
    // The reason is the network's, without the URL: the bot token is part of every Bot API URL.
    await expect(failed).rejects.not.toThrow(r.fake.token);
    // The network may come back: the outbox tries again later.
    await expect(failed).rejects.toMatchObject({
      platform: "telegram",
      method: "sendMessage",
      permanent: false,
    });
    expect(r.fake.callsTo("sendMessage")).toHaveLength(2);
  });

  it("goes through an HTTP proxy (CONNECT) when channels.telegram.proxy is set, with its credentials", async () => {
    const tunnels: string[] = [];
    const credentials = new Set<string | undefined>();
    const sockets = new Set<Socket>();
    const proxy = createServer();
    proxy.on("connect", (req, client: Socket) => {
      tunnels.push(req.url ?? "");
      credentials.add(req.headers["proxy-authorization"]);
      const [host, port] = (req.url ?? "").split(":");
      const upstream = connect(Number(port), host, () => {
        client.write("HTTP/1.1 200 Connection Established\r\n\r\n");
        upstream.pipe(client);
        client.pipe(upstream);
      });
      for (const s of [client, upstream]) {
        sockets.add(s);
        s.on("close", () => sockets.delete(s));
        s.on("error", () => undefined);
      }
    });
    await new Promise<void>((resolve) => proxy.listen(0, "127.0.0.1", resolve));
    try {
      const fake = await FakeTelegram.start();
      const { port } = proxy.address() as AddressInfo;
      r = await rig({ fake, config: { proxy: `http://ada:p%40ss@127.0.0.1:${port}` } });
      await r.start();
      r.fake.userMessage({ text: "via proxy" });
      expect((await r.nthInbound(1)).content).toBe("via proxy");
      expect(tunnels.length).toBeGreaterThan(0);
      expect(new Set(tunnels)).toEqual(new Set([new URL(fake.apiRoot).host]));
      expect(credentials).toEqual(new Set([`Basic ${Buffer.from("ada:p@ss").toString("base64")}`]));
      await r.cleanup();
      r = undefined;
    } finally {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => proxy.close(() => resolve()));
    }
  });

  it("refuses a proxy it cannot use, naming the key", async () => {
    await expect(rig({ config: { proxy: "socks5://127.0.0.1:1080" } })).rejects.toThrow(
      /channels\.telegram\.proxy must be an http:\/\/ proxy/,
    );
  });
});

describe("webhook mode", () => {
  function post(
    port: number,
    path: string,
    body: string,
    headers: Record<string, string> = {},
    method = "POST",
  ) {
    return new Promise<{ status: number; body: string }>((resolve, reject) => {
      const req = request(
        {
          host: "127.0.0.1",
          port,
          path,
          method,
          headers: { "content-type": "application/json", ...headers },
        },
        (res) => {
          let text = "";
          res.on("data", (c: Buffer) => (text += c.toString()));
          res.on("end", () => resolve({ status: res.statusCode ?? 0, body: text }));
        },
      );
      req.on("error", reject);
      req.end(body);
    });
  }

  const update = (id: number, text: string) =>
    JSON.stringify({
      update_id: id,
      message: {
        message_id: id,
        date: 1,
        chat: { id: 42, type: "private" },
        from: { id: 42, is_bot: false, first_name: "Ada" },
        text,
      },
    });

  it("sets the webhook with the secret and takes only requests carrying it", async () => {
    r = await rig({
      config: {
        mode: "webhook",
        webhook: {
          url: "https://palaver.test/tg/hook",
          secretToken: "s3cret_token-1",
          host: "127.0.0.1",
          port: 0,
          path: "/tg/hook",
        },
      },
    });
    await r.start();
    expect(r.fake.webhook).toMatchObject({
      url: "https://palaver.test/tg/hook",
      secret_token: "s3cret_token-1",
    });
    expect(r.fake.callsTo("getUpdates")).toHaveLength(0);
    const { port } = r.channel.webhookAddress!;

    expect((await post(port, "/tg/hook", update(1, "no secret"))).status).toBe(401);
    expect(
      (await post(port, "/tg/hook", update(2, "wrong"), { "x-telegram-bot-api-secret-token": "guess" }))
        .status,
    ).toBe(401);
    const good = { "x-telegram-bot-api-secret-token": "s3cret_token-1" };
    expect((await post(port, "/elsewhere", update(3, "path"), good)).status).toBe(404);
    expect((await post(port, "/tg/hook", "", good, "GET")).status).toBe(405);
    expect((await post(port, "/tg/hook", "{not json", good)).status).toBe(400);
    expect((await post(port, "/tg/hook", JSON.stringify({ message: {} }), good)).status).toBe(400);
    expect((await post(port, "/tg/hook", "x".repeat(2 * 1024 * 1024), good)).status).toBe(413);
    expect(r.inbound).toHaveLength(0);

    expect(await post(port, "/tg/hook", update(4, "hello by webhook"), good)).toEqual({
      status: 200,
      body: "ok",
    });
    expect((await r.nthInbound(1)).content).toBe("hello by webhook");
    // Telegram retrying the same update does not make a second message.
    expect((await post(port, "/tg/hook", update(4, "hello by webhook"), good)).status).toBe(200);
    expect((await post(port, "/tg/hook", update(5, "next"), good)).status).toBe(200);
    await r.nthInbound(2);
    expect(r.inbound.map((m) => m.content)).toEqual(["hello by webhook", "next"]);
  });

  it("makes up a secret when none is configured", async () => {
    r = await rig({ config: { mode: "webhook", webhook: { url: "https://palaver.test/hook", port: 0 } } });
    await r.start();
    expect(r.fake.webhook?.secret_token).toMatch(/^[0-9a-f]{48}$/);
  });

  it("reports a port that is taken", async () => {
    const taken = createNetServer();
    await new Promise<void>((resolve) => taken.listen(0, "127.0.0.1", resolve));
    const { port } = taken.address() as AddressInfo;
    try {
      r = await rig({ config: { mode: "webhook", webhook: { url: "https://palaver.test/hook", port } } });
      await expect(r.start()).rejects.toThrow(`cannot listen on 127.0.0.1:${port} for the Telegram webhook`);
    } finally {
      await new Promise<void>((resolve) => taken.close(() => resolve()));
    }
  });
});
