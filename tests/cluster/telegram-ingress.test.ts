/**
 * Cluster mode, Telegram: two instances (two real grammY channels, each with its Lease on its own
 * connection) on one FakeTelegram and one real PostgreSQL. Only the lease holder long-polls; both
 * send; when the holder stops or its database connection dies, the other takes over and a message
 * sent meanwhile is received once.
 */
import { afterEach, describe, expect, it } from "vitest";
import { INGRESS_LEASES } from "../../src/channels/ingress-lease.js";
import { Lease } from "../../src/db/lease.js";
import { logger } from "../../src/log.js";
import { FakeTelegram } from "../fakes/telegram-server.js";
import { cutConnections, postgresMissing, usePostgres } from "../helpers/postgres.js";
import { requireOrSkip } from "../helpers/requires.js";
import { waitFor } from "../helpers/wait.js";
import { rig, type Rig } from "../channels/telegram/helpers.js";

const log = logger("test");
const missing = requireOrSkip(postgresMissing());

interface Instance {
  name: string;
  rig: Rig;
  lease: Lease;
  /** Long polls (getUpdates with a timeout) this instance sent. */
  longPolls: number;
  /** Long polls it sent while not holding the lease: must stay empty. */
  unleasedPolls: number;
}

describe.skipIf(missing)("Telegram ingress under a lease (real PostgreSQL)", () => {
  const { open, createDatabase } = usePostgres();
  let fake: FakeTelegram | undefined;
  const instances: Instance[] = [];

  afterEach(async () => {
    for (const i of instances.splice(0)) await i.rig.cleanup();
    await fake?.close();
    fake = undefined;
  });

  async function instance(name: string, url: string, tg: FakeTelegram): Promise<Instance> {
    const lease = new Lease({ url, name: INGRESS_LEASES.telegram, instance: name, log, retryMs: 100 });
    // dropPendingUpdates is for a bot coming back after downtime: a takeover must not drop what came meanwhile.
    const r = await rig({ fake: tg, lease, config: { dropPendingUpdates: true } });
    const it: Instance = { name, rig: r, lease, longPolls: 0, unleasedPolls: 0 };
    // grammY's own hook on its API calls: what this instance asked Telegram for, and when.
    r.channel.bot.api.config.use((prev, method, payload, signal) => {
      const timeout = (payload as { timeout?: number } | undefined)?.timeout ?? 0;
      if (method === "getUpdates" && timeout > 0) {
        it.longPolls++;
        if (!lease.held) it.unleasedPolls++;
      }
      return prev(method, payload, signal);
    });
    instances.push(it);
    return it;
  }

  const texts = (i: Instance) => i.rig.inbound.map((m) => m.content);

  it("only the holder polls, both send, and the other takes over when the holder stops", async () => {
    const url = await createDatabase();
    const tg = (fake = await FakeTelegram.start());
    const a = await instance("a", url, tg);
    const b = await instance("b", url, tg);
    await a.rig.start();
    await waitFor(() => a.rig.channel.bot.isRunning(), undefined, "a polls");
    await b.rig.start();
    // b keeps trying for the lease meanwhile, and does not poll.
    await waitFor(() => b.lease.attempts >= 3 && a.longPolls >= 2, undefined, "b tried three times");
    expect(b.rig.channel.bot.isRunning()).toBe(false);
    expect(b.longPolls).toBe(0);

    // Sending needs no lease.
    await a.rig.channel.send({ channel: "telegram", chatId: "42", content: "reply sent by a" });
    await b.rig.channel.send({ channel: "telegram", chatId: "42", content: "reply sent by b" });
    expect(tg.sent.map((m) => m.text)).toEqual(["reply sent by a", "reply sent by b"]);

    tg.userMessage({ text: "first" });
    await a.rig.nthInbound(1);

    // The holder stops: the lease goes to b, which gets what was sent while nobody polled.
    await a.rig.channel.stop();
    expect(a.rig.channel.bot.isRunning()).toBe(false);
    tg.userMessage({ text: "while nobody polls" });
    await b.rig.nthInbound(1);
    expect(b.rig.channel.bot.isRunning()).toBe(true);
    tg.userMessage({ text: "after the takeover" });
    await b.rig.nthInbound(2);
    expect(texts(a)).toEqual(["first"]);
    expect(texts(b)).toEqual(["while nobody polls", "after the takeover"]);
    expect(a.unleasedPolls + b.unleasedPolls).toBe(0);
  });

  it("the holder whose database connection dies stops polling; the lease holder then gets each message once", async () => {
    const url = await createDatabase();
    const admin = open(url);
    const tg = (fake = await FakeTelegram.start());
    const a = await instance("a", url, tg);
    const b = await instance("b", url, tg);
    await a.rig.start();
    await waitFor(() => a.rig.channel.bot.isRunning(), undefined, "a polls");
    await b.rig.start();
    await waitFor(() => b.lease.attempts >= 2, undefined, "b tries for the lease");
    let aLost = false;
    a.lease.onLost(() => void (aLost = true));

    await cutConnections(admin, "palaver a");
    await waitFor(() => aLost, undefined, "a learns it lost the lease");
    // Whoever holds the lease next polls, and only it.
    await waitFor(
      () => [a, b].some((i) => i.lease.held && i.rig.channel.bot.isRunning()),
      undefined,
      "a holder polls again",
    );
    tg.userMessage({ text: "after the connection died" });
    tg.userMessage({ text: "and one more" });
    await waitFor(() => texts(a).length + texts(b).length >= 2, undefined, "both messages arrive");
    const holder = a.lease.held ? a : b;
    // A third message proves nothing more was on its way.
    tg.userMessage({ text: "the last" });
    await waitFor(() => texts(holder).includes("the last"), undefined, "the last message");
    expect([...texts(a), ...texts(b)].sort()).toEqual(
      ["after the connection died", "and one more", "the last"].sort(),
    );
    expect(a.unleasedPolls + b.unleasedPolls).toBe(0);
    expect([a, b].filter((i) => i.rig.channel.bot.isRunning()).map((i) => i.name)).toEqual([holder.name]);
  });
});
