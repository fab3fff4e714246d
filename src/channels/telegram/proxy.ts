/**
 * channels.telegram.proxy: Bot API calls tunnelled through an HTTP proxy
 * with CONNECT (what "http://host:port" proxies such as Clash, Squid or
 * Privoxy offer). grammy's fetch (node-fetch) takes a node http(s) Agent, so
 * this is an Agent whose connections are opened through the proxy.
 */
import { Agent as HttpAgent, request, type ClientRequestArgs } from "node:http";
import { Agent as HttpsAgent } from "node:https";
import type { Duplex } from "node:stream";
import { connect as tlsConnect } from "node:tls";
import { ConfigError } from "../../util/errors.js";

const CONNECT_TIMEOUT_MS = 15_000;

type Callback = (err: Error | null, stream: Duplex) => void;

/** An Agent for requests to `apiRoot` through the proxy at `proxyUrl`, at most `maxSockets` tunnels. */
export function proxyAgent(proxyUrl: string, apiRoot: string, maxSockets = Infinity): HttpAgent {
  let proxy: URL;
  try {
    proxy = new URL(proxyUrl);
  } catch (err) {
    throw new ConfigError(`channels.telegram.proxy is not a URL: ${proxyUrl}`, ["channels.telegram.proxy"], {
      cause: err,
    });
  }
  if (proxy.protocol !== "http:") {
    throw new ConfigError(
      `channels.telegram.proxy must be an http:// proxy (CONNECT); ${proxy.protocol}// proxies are not supported`,
      ["channels.telegram.proxy"],
    );
  }
  const secure = new URL(apiRoot).protocol === "https:";
  const auth = proxy.username
    ? `Basic ${Buffer.from(`${decodeURIComponent(proxy.username)}:${decodeURIComponent(proxy.password)}`).toString("base64")}`
    : undefined;

  const tunnel = (options: ClientRequestArgs, callback: Callback): void => {
    const host = options.hostname ?? options.host ?? "localhost";
    const port = Number(options.port ?? (secure ? 443 : 80));
    const connectReq = request({
      host: proxy.hostname,
      port: Number(proxy.port || 80),
      method: "CONNECT",
      path: `${host}:${port}`,
      headers: { host: `${host}:${port}`, ...(auth ? { "proxy-authorization": auth } : {}) },
      timeout: CONNECT_TIMEOUT_MS,
    });
    connectReq.once("connect", (res, socket) => {
      if (res.statusCode !== 200) {
        socket.destroy();
        callback(
          new Error(`proxy ${proxy.host} refused the tunnel to ${host}:${port}: HTTP ${res.statusCode}`),
          socket,
        );
        return;
      }
      callback(null, secure ? tlsConnect({ socket, servername: host }) : socket);
    });
    connectReq.once("timeout", () => connectReq.destroy(new Error(`proxy ${proxy.host} did not answer`)));
    connectReq.once("error", (err) => callback(err, connectReq.socket as Duplex));
    connectReq.end();
  };

  if (secure) {
    return new (class extends HttpsAgent {
      override createConnection(options: ClientRequestArgs, callback?: Callback): Duplex | null | undefined {
        if (callback) tunnel(options, callback);
        return undefined;
      }
    })({ keepAlive: true, maxSockets });
  }
  return new (class extends HttpAgent {
    override createConnection(options: ClientRequestArgs, callback?: Callback): Duplex | null | undefined {
      if (callback) tunnel(options, callback);
      return undefined;
    }
  })({ keepAlive: true, maxSockets });
}
