import { connect, createServer, type Socket } from "node:net";
import { describe, expect, it } from "vitest";
import { Lease, leaseHolders } from "../../src/db/lease.js";
import { logger } from "../../src/log.js";
import { connectionsNamed, cutConnections, postgresMissing, usePostgres } from "../helpers/postgres.js";
import { requireOrSkip } from "../helpers/requires.js";
import { waitFor } from "../helpers/wait.js";

const log = logger("test");
const missing = requireOrSkip(postgresMissing());
const NAME = "ingress:telegram";

describe.skipIf(missing)("leases (real PostgreSQL)", () => {
  const postgres = usePostgres();
  const { open, createDatabase } = postgres;

  it("gives a lease to one instance at a time and to another when the holder's connection dies", async () => {
    const url = await createDatabase();
    const admin = open(url);
    const events: string[] = [];
    const make = (instance: string) =>
      new Lease({
        url,
        name: NAME,
        instance,
        log,
        retryMs: 100,
        onAcquired: () => events.push(`${instance} acquired`),
        onLost: () => events.push(`${instance} lost`),
      });
    const a = make("a");
    const b = make("b");
    try {
      a.start();
      await waitFor(() => a.held, undefined, "a holds the lease");
      b.start();
      // b keeps trying while a holds it.
      await waitFor(() => b.attempts >= 3, undefined, "b tried three times");
      expect(b.held).toBe(false);
      expect(await leaseHolders(admin, [NAME, "ingress:discord"])).toEqual(new Map([[NAME, "a"]]));
      // a's connection is cut: a stops acting as the holder at once.
      await cutConnections(admin, "palaver a");
      await waitFor(() => events.includes("a lost"), undefined, "a knows it lost the lease");
      await waitFor(() => a.held || b.held, undefined, "one of them holds it again");
      // The holder dies (its connection closes): the other takes over.
      const [holder, other] = a.held ? [a, b] : [b, a];
      await holder.stop();
      await waitFor(() => other.held, undefined, "the other takes the lease over");
      expect(await leaseHolders(admin, [NAME])).toEqual(new Map([[NAME, other === a ? "a" : "b"]]));
    } finally {
      await a.stop();
      await b.stop();
    }
    expect(await leaseHolders(admin, [NAME])).toEqual(new Map());
  });

  it("stopped and started again while an attempt is in flight, it takes the lease at once, on one connection", async () => {
    const url = await createDatabase();
    const admin = open(url);
    const proxy = await holdingProxy(postgres.server.port);
    const viaProxy = new URL(url);
    viaProxy.port = String(proxy.port);
    const events: string[] = [];
    // Retries ten minutes apart: within this test only the attempt a start() makes can take it.
    const lease = new Lease({
      url: viaProxy.href,
      name: NAME,
      instance: "a",
      log,
      retryMs: 600_000,
      onAcquired: () => events.push("acquired"),
      onLost: () => events.push("lost"),
    });
    try {
      proxy.holdNextQueries();
      lease.start();
      await waitFor(() => proxy.held > 0, undefined, "the first attempt is sent and held");
      // stop() closes the connection under that attempt; the attempt fails after start() began anew.
      const stopping = lease.stop();
      lease.start();
      await stopping;
      await waitFor(() => lease.held, undefined, "the restarted lease holds");
      expect(await connectionsNamed(admin, "palaver a")).toBe(1);
      expect(await leaseHolders(admin, [NAME])).toEqual(new Map([[NAME, "a"]]));
    } finally {
      await lease.stop();
      await proxy.close();
    }
    expect(events).toEqual(["acquired", "lost"]);
    // Its connection is gone, and with it the lock: another instance takes the lease.
    await waitFor(
      async () => (await connectionsNamed(admin, "palaver a")) === 0,
      undefined,
      "a's connection is gone",
    );
    const other = new Lease({ url, name: NAME, instance: "b", log, retryMs: 100 });
    try {
      other.start();
      await waitFor(() => other.held, undefined, "b takes the lease");
      expect(await leaseHolders(admin, [NAME])).toEqual(new Map([[NAME, "b"]]));
    } finally {
      await other.stop();
    }
  });
});

/**
 * A loopback TCP proxy to the server. After holdNextQueries(), the next connection through it gets
 * its startup through (the client's first message) but nothing it sends later: its first query
 * stays in flight, unanswered, until the client closes the connection. `held` counts what it held.
 */
async function holdingProxy(serverPort: number): Promise<{
  port: number;
  held: number;
  holdNextQueries(): void;
  close(): Promise<void>;
}> {
  const sockets = new Set<Socket>();
  let holdNext = false;
  const state = { held: 0 };
  const proxy = createServer((client) => {
    const hold = holdNext;
    holdNext = false;
    const upstream = connect(serverPort, "127.0.0.1");
    for (const socket of [client, upstream]) {
      sockets.add(socket);
      socket.on("error", () => socket.destroy());
      socket.on("close", () => {
        sockets.delete(socket);
        client.destroy();
        upstream.destroy();
      });
    }
    let messages = 0;
    client.on("data", (data) => {
      if (hold && ++messages > 1) state.held++;
      else upstream.write(data);
    });
    upstream.pipe(client);
  });
  await new Promise<void>((resolve) => proxy.listen(0, "127.0.0.1", resolve));
  return {
    port: (proxy.address() as { port: number }).port,
    get held() {
      return state.held;
    },
    holdNextQueries: () => void (holdNext = true),
    close: async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => proxy.close(resolve));
    },
  };
}
