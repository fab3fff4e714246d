/**
 * Final replies sent once in the cluster (cluster/replies.ts through the channel manager), against
 * a real PostgreSQL: claimed in palaver.outbox as late as can be (after the channel's own waits),
 * once per reply (a retry or a reply held while its channel was down does not claim again), and
 * never sent by a second attempt of the same turn.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { MessageBus } from "../../src/bus/bus.js";
import type { OutboundMessage } from "../../src/bus/types.js";
import { ChannelManager } from "../../src/channels/manager.js";
import { ClusterReplies } from "../../src/cluster/replies.js";
import { openDatabase, type Database } from "../../src/db/pool.js";
import { migrate } from "../../src/db/schema.js";
import { logger } from "../../src/log.js";
import { postgresMissing, startPostgres, type TestPostgres } from "../helpers/postgres.js";
import { requireOrSkip } from "../helpers/requires.js";
import { TestChannel } from "../helpers/test-channel.js";
import { waitFor } from "../helpers/wait.js";

const log = logger("test");
const missing = requireOrSkip(postgresMissing());

/** A channel that, like Telegram's, waits for a typing call in flight before it can send. */
class SlowToReadyChannel extends TestChannel {
  private release: (() => void) | undefined;
  readonly waiting: OutboundMessage[] = [];

  readyToSend(msg: OutboundMessage): Promise<void> {
    this.waiting.push(msg);
    return new Promise((resolve) => (this.release = resolve));
  }

  ready(): void {
    this.release?.();
  }
}

describe.skipIf(missing)("replies sent once in the cluster (real PostgreSQL)", () => {
  let server: TestPostgres;
  let db: Database;
  const managers: ChannelManager[] = [];

  beforeAll(async () => {
    server = await startPostgres();
    db = openDatabase({ url: await server.createDatabase(), applicationName: "palaver test", log });
    await migrate(db, log);
  });
  afterEach(async () => {
    for (const m of managers.splice(0)) await m.stop(1000);
    await db.query("DELETE FROM palaver.outbox");
  });
  afterAll(async () => {
    await db?.end();
    await server?.stop();
  });

  function managerOf(instance: string): { bus: MessageBus; manager: ChannelManager } {
    const bus = new MessageBus();
    const manager = new ChannelManager({
      bus,
      sendProgress: false,
      sendToolHints: false,
      log,
      retryBaseMs: 20,
      retryMaxMs: 40,
      outboxRetryBaseMs: 10,
      sentOnce: new ClusterReplies(db, instance),
    });
    managers.push(manager);
    return { bus, manager };
  }

  const reply = (turnId: string, content: string): OutboundMessage => ({
    channel: "tg",
    chatId: "c1",
    content,
    turnId,
  });

  const outbox = async () =>
    (
      await db.query<{ turn_id: string; seq: number; state: string; sent_by: string }>(
        "SELECT turn_id, seq, state, sent_by FROM palaver.outbox ORDER BY turn_id, seq",
      )
    ).rows;

  it("claims a reply only once the channel is ready to send it, then confirms it", async () => {
    const { bus, manager } = managerOf("a");
    const channel = new SlowToReadyChannel("tg");
    manager.add(channel, { allowFrom: ["*"] });
    await manager.start();

    bus.publishOutbound(reply("turn-1", "hello"));
    await waitFor(() => channel.waiting.length === 1);
    // Waiting on the channel (a typing call in flight): nothing claimed yet, so an instance dying
    // now leaves the reply to the turn's next attempt.
    expect(await outbox()).toEqual([]);

    channel.ready();
    await waitFor(() => channel.sent.length === 1);
    await waitFor(async () => (await outbox())[0]?.state === "sent");
    expect(await outbox()).toEqual([{ turn_id: "turn-1", seq: 1, state: "sent", sent_by: "a" }]);
  });

  it("sends a reply held while its channel was down once it runs, and a failed send retried once", async () => {
    const { bus, manager } = managerOf("a");
    await manager.start();
    // Not added yet: the turn's replies wait for the channel.
    bus.publishOutbound(reply("turn-2", "first"));
    bus.publishOutbound(reply("turn-2", "second"));
    await manager.flush(1000);
    expect(manager.heldFor("tg")).toBe(2);

    const channel = new TestChannel("tg", { failSends: 1 });
    await manager.replace(channel, { allowFrom: ["*"] });
    await waitFor(() => channel.sent.length === 2);
    expect(channel.sent.map((m) => m.content)).toEqual(["first", "second"]);
    expect(channel.sendAttempts).toBe(3);
    await waitFor(async () => (await outbox()).every((r) => r.state === "sent"));
    expect((await outbox()).map((r) => [r.seq, r.sent_by])).toEqual([
      [1, "a"],
      [2, "a"],
    ]);
  });

  it("a second attempt of a turn (another instance) sends only the replies the first did not claim", async () => {
    const first = managerOf("a");
    const before = new TestChannel("tg");
    first.manager.add(before, { allowFrom: ["*"] });
    await first.manager.start();
    first.bus.publishOutbound(reply("turn-3", "one"));
    await waitFor(() => before.sent.length === 1);

    // The turn runs again elsewhere (its first instance went quiet past the turn timeout) and
    // produces its replies again, one more than the first attempt got to.
    const second = managerOf("b");
    const after = new TestChannel("tg");
    second.manager.add(after, { allowFrom: ["*"] });
    await second.manager.start();
    second.bus.publishOutbound(reply("turn-3", "one, again"));
    second.bus.publishOutbound(reply("turn-3", "two"));
    await waitFor(() => after.sent.length === 1);
    await second.manager.flush(1000);

    expect(after.sent.map((m) => m.content)).toEqual(["two"]);
    await waitFor(async () => (await outbox()).every((r) => r.state === "sent"));
    expect((await outbox()).map((r) => [r.seq, r.sent_by])).toEqual([
      [1, "a"],
      [2, "b"],
    ]);
  });
});
