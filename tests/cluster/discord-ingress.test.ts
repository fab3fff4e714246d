/**
 * Cluster mode, Discord: two instances (two real discord.js channels, each with its Lease on its
 * own connection) on one FakeDiscord and one real PostgreSQL. Only the lease holder opens the
 * gateway connection; the other sends over REST alone; when the holder stops, the other connects.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import type { InboundMessage } from "../../src/bus/types.js";
import { DiscordChannel } from "../../src/channels/discord/adapter.js";
import { INGRESS_LEASES } from "../../src/channels/ingress-lease.js";
import { DiscordConfigSchema } from "../../src/config/platforms/discord.js";
import { Lease } from "../../src/db/lease.js";
import { logger } from "../../src/log.js";
import { FakeDiscord } from "../fakes/discord-server.js";
import { cutConnections, postgresMissing, usePostgres } from "../helpers/postgres.js";
import { requireOrSkip } from "../helpers/requires.js";
import { waitFor } from "../helpers/wait.js";

const log = logger("test");
const missing = requireOrSkip(postgresMissing());

interface Instance {
  channel: DiscordChannel;
  lease: Lease;
  inbound: InboundMessage[];
  start(): Promise<void>;
}

describe.skipIf(missing)("Discord ingress under a lease (real PostgreSQL)", () => {
  const { open, createDatabase } = usePostgres();
  let fake: FakeDiscord | undefined;
  let dir = "";
  const instances: Instance[] = [];

  afterEach(async () => {
    for (const i of instances.splice(0)) await i.channel.stop();
    await fake?.close();
    fake = undefined;
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  function instance(name: string, url: string, discord: FakeDiscord): Instance {
    const lease = new Lease({ url, name: INGRESS_LEASES.discord, instance: name, log, retryMs: 100 });
    const channel = new DiscordChannel({
      config: DiscordConfigSchema.parse({
        enabled: true,
        token: discord.token,
        apiUrl: discord.apiUrl,
        allowFrom: ["*"],
      }),
      workspace: join(dir, name),
      maxMediaBytes: 1024 * 1024,
      connectTimeoutMs: 60_000, // only ends a hung test
      lease,
      log,
    });
    const inbound: InboundMessage[] = [];
    const sink = {
      allows: () => true,
      publishInbound: (m: InboundMessage) => inbound.push(m),
      refuse: () => {},
    };
    const it: Instance = {
      channel,
      lease,
      inbound,
      start: () => channel.start(sink, new AbortController().signal),
    };
    instances.push(it);
    return it;
  }

  it("only the holder connects to the gateway, the other sends over REST, and takes over when the holder stops", async () => {
    const url = await createDatabase();
    dir = await mkdtemp(join(tmpdir(), "palaver-discord-cluster-"));
    const discord = (fake = await FakeDiscord.start());
    const guild = discord.addGuild({ name: "home", channels: ["general"] });
    const general = guild.channels[0]!;
    const alice = discord.addUser("alice");
    const dm = discord.dmChannel(alice);
    const a = instance("a", url, discord);
    const b = instance("b", url, discord);

    await a.start();
    await waitFor(() => a.lease.held && discord.commands.length > 0, undefined, "a connected and ready");
    await b.start();
    await waitFor(() => b.lease.attempts >= 3, undefined, "b tried three times");
    expect(discord.connections).toHaveLength(1);

    // b holds no gateway connection and still sends: to a server channel and to a DM.
    await b.channel.send({ channel: "discord", chatId: general.id, content: "from b, in general" });
    await b.channel.send({ channel: "discord", chatId: dm.id, content: "from b, in a DM" });
    await a.channel.send({ channel: "discord", chatId: dm.id, content: "from a, in a DM" });
    expect(discord.sent.map((m) => [m.channelId, m.content])).toEqual([
      [general.id, "from b, in general"],
      [dm.id, "from b, in a DM"],
      [dm.id, "from a, in a DM"],
    ]);

    discord.userMessage({ channelId: dm.id, author: alice, content: "to the holder" });
    await waitFor(() => a.inbound.length === 1, undefined, "a receives the message");

    // The holder stops: b takes the lease and connects, and the next message reaches b.
    await a.channel.stop();
    await waitFor(() => b.lease.held && discord.connections.length === 2, undefined, "b connects");
    // b is ready once it registered its commands (what arrives before ready is not acted on).
    await waitFor(() => discord.commandRegistrations === 2, undefined, "b is ready");
    discord.userMessage({ channelId: dm.id, author: alice, content: "to the new holder" });
    await waitFor(() => b.inbound.length === 1, undefined, "b receives the message");
    expect(a.inbound.map((m) => m.content)).toEqual(["to the holder"]);
    expect(b.inbound.map((m) => m.content)).toEqual(["to the new holder"]);
  });

  it("the holder whose database connection dies closes its gateway connection; the next holder connects", async () => {
    const url = await createDatabase();
    const admin = open(url);
    dir = await mkdtemp(join(tmpdir(), "palaver-discord-cluster-"));
    const discord = (fake = await FakeDiscord.start());
    const alice = discord.addUser("alice");
    const dm = discord.dmChannel(alice);
    const a = instance("a", url, discord);
    const b = instance("b", url, discord);
    await a.start();
    await waitFor(() => a.lease.held && discord.liveConnection !== null, undefined, "a connected");
    await b.start();
    await waitFor(() => b.lease.attempts >= 2, undefined, "b tries for the lease");
    let aLost = false;
    a.lease.onLost(() => void (aLost = true));
    await cutConnections(admin, "palaver a");
    await waitFor(() => aLost, undefined, "a learns it lost the lease");
    // a's gateway connection ends with its lease; whoever holds it next connects afresh.
    await waitFor(() => discord.connections[0]!.closeCode !== undefined, undefined, "a's connection closed");
    await waitFor(
      () => discord.connections.length === 2 && discord.commandRegistrations === 2,
      undefined,
      "the next holder connected and ready",
    );
    const holder = a.lease.held ? a : b;
    expect([a, b].filter((i) => i.lease.held)).toHaveLength(1);
    discord.userMessage({ channelId: dm.id, author: alice, content: "after the connection died" });
    await waitFor(() => holder.inbound.length === 1, undefined, "the holder receives it");
    expect([...a.inbound, ...b.inbound].map((m) => m.content)).toEqual(["after the connection died"]);
  });
});
