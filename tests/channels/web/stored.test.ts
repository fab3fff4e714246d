/**
 * Cluster mode (the sink has `stored`): a message posted from the page is answered 202 only once
 * it is stored in the turn queue, so an instance killed right after the answer loses nothing; a
 * database that never answers holds the page no longer than the channel's bound. The real web
 * channel on the gateway's HTTP server, with a stand-in sink.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { request as httpRequest } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import type { InboundMessage } from "../../../src/bus/types.js";
import { createWebChannel } from "../../../src/channels/web/adapter.js";
import type { Channel, InboundSink } from "../../../src/channels/types.js";
import { ConfigSchema } from "../../../src/config/schema.js";
import { HealthServer } from "../../../src/daemon/health.js";
import { Metrics } from "../../../src/daemon/metrics.js";
import { logger } from "../../../src/log.js";
import { SessionStore } from "../../../src/sessions/store.js";
import { waitFor } from "../../helpers/wait.js";

const TOKEN = "stored-test-token-0123456789";
const log = logger("test");

interface Rig {
  base: string;
  inbound: InboundMessage[];
  close(): Promise<void>;
}

let rig: Rig | undefined;
afterEach(async () => {
  await rig?.close();
  rig = undefined;
});

/** The web channel on its own HTTP server, handing messages to a sink whose `stored` is `stored`. */
async function startWeb(stored: () => Promise<void>, storeWaitMs?: number): Promise<Rig> {
  const dir = await mkdtemp(join(tmpdir(), "palaver-web-stored-"));
  const workspace = join(dir, "ws");
  const config = ConfigSchema.parse({
    agents: { defaults: { workspace } },
    channels: { web: { enabled: true, token: TOKEN } },
  });
  const metrics = new Metrics({ queueDepth: () => 0, activeTurns: () => 0, activeSubagents: () => 0 });
  const http = new HealthServer({
    host: "127.0.0.1",
    port: 0,
    metrics,
    readiness: () => ({ ready: true, components: {} }),
    log,
  });
  await http.start();
  let channel: Channel | undefined;
  const lifetime = new AbortController();
  const inbound: InboundMessage[] = [];
  try {
    channel = await createWebChannel(
      {
        config,
        workspace,
        log,
        gateway: {
          http,
          sessions: new SessionStore(join(workspace, "sessions"), log),
          stateDir: join(dir, "state"),
          model: "fake-model",
          usageReport: () => {
            throw new Error("not asked in these tests");
          },
        },
      },
      storeWaitMs === undefined ? {} : { storeWaitMs },
    );
    const sink: InboundSink = {
      allows: () => true,
      publishInbound: (msg) => inbound.push(msg),
      refuse: () => undefined,
      stored,
    };
    await channel.start(sink, lifetime.signal);
  } catch (err) {
    await http.stop();
    await rm(dir, { recursive: true, force: true });
    throw err;
  }
  const started = channel;
  return {
    base: http.url!,
    inbound,
    async close() {
      lifetime.abort();
      await started.stop();
      await http.stop();
      await rm(dir, { recursive: true, force: true });
    },
  };
}

/** POSTs a message as a Bearer client; resolves with the HTTP status once the answer arrived. */
function postMessage(base: string, conversation: string, text: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      `${base}/api/conversations/${conversation}/messages`,
      {
        method: "POST",
        headers: { authorization: `Bearer ${TOKEN}`, "content-type": "application/json" },
      },
      (res) => {
        res.resume();
        res.on("end", () => resolve(res.statusCode ?? 0));
        res.on("error", reject);
      },
    );
    req.on("error", reject);
    req.end(JSON.stringify({ text }));
  });
}

describe("web chat in cluster mode: the answer to a message", () => {
  it("comes only once the message is stored", async () => {
    let release = () => {};
    const held = new Promise<void>((resolve) => (release = resolve));
    let storedCalls = 0;
    rig = await startWeb(() => {
      storedCalls++;
      return held;
    }, 60_000);
    let status: number | undefined;
    const answered = postMessage(rig.base, "conv1", "keep me").then((s) => (status = s));
    try {
      // The channel handed the message on and waits for it to be stored (before the fix it
      // answered at once and never asked).
      await waitFor(() => storedCalls === 1 || status !== undefined, undefined, "the POST to wait or answer");
      expect(rig.inbound.map((m) => m.content)).toEqual(["keep me"]);
      expect(storedCalls).toBe(1);
      expect(status).toBeUndefined();
    } finally {
      release();
    }
    expect(await answered).toBe(202);
  });

  it("comes after the channel's bound when the database never answers", async () => {
    let storedCalls = 0;
    rig = await startWeb(() => {
      storedCalls++;
      return new Promise<void>(() => undefined);
    }, 20);
    expect(await postMessage(rig.base, "conv1", "slow database")).toBe(202);
    expect(rig.inbound.map((m) => m.content)).toEqual(["slow database"]);
    expect(storedCalls).toBe(1);
  });
});
