/**
 * Cluster mode end to end in one process: gateways (each its own state folder, one shared
 * workspace) on one real PostgreSQL, loopback channels in place of the platforms, the fake LLM.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { OutboundMessage } from "../../src/bus/types.js";
import { ConfigSchema } from "../../src/config/schema.js";
import { Gateway } from "../../src/gateway.js";
import { createProvider } from "../../src/llm/openai-provider.js";
import { FakeOpenAI, lastUserText } from "../fakes/openai-server.js";
import { postgresMissing, usePostgres } from "../helpers/postgres.js";
import { requireOrSkip } from "../helpers/requires.js";
import { TestChannel } from "../helpers/test-channel.js";
import { waitFor } from "../helpers/wait.js";

const missing = requireOrSkip(postgresMissing());

describe.skipIf(missing)("cluster mode: gateways sharing one PostgreSQL", () => {
  const { createDatabase } = usePostgres();
  let dir: string;
  let fake: FakeOpenAI;
  const running: Gateway[] = [];

  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), "palaver-cluster-"));
    fake = await FakeOpenAI.start();
  });
  afterEach(async () => {
    await Promise.all(running.splice(0).map((g) => g.stop(100)));
    await fake.close();
    await rm(dir, { recursive: true, force: true });
  });

  async function startInstance(
    database: string,
    name: string,
  ): Promise<{ gateway: Gateway; channel: TestChannel }> {
    const config = ConfigSchema.parse({
      agents: { defaults: { workspace: join(dir, "ws"), provider: "custom", model: "fake-model" } },
      providers: { custom: { apiKey: "k", apiBase: fake.baseURL } },
      channels: { telegram: { enabled: true, allowFrom: ["*"] } },
      gateway: { heartbeat: { enabled: false }, port: 0 },
      cluster: { database, turnTimeoutSeconds: 10 },
    });
    const channel = new TestChannel("telegram");
    const gateway = await Gateway.create({
      loaded: { config, workspace: join(dir, "ws"), path: join(dir, name, "config.json") },
      provider: createProvider(config),
      platforms: { telegram: async () => channel },
    });
    running.push(gateway);
    await gateway.start();
    return { gateway, channel };
  }

  it("answers every message once, in each chat's order, on both instances, duplicates delivered to both ignored", async () => {
    const database = await createDatabase();
    const a = await startInstance(database, "a");
    const b = await startInstance(database, "b");
    // Slow enough that both instances get work while the other is busy.
    fake.setHandler((req) => ({ content: `re: ${lastUserText(req)}`, delayMs: 30 }));

    const chats = 12;
    const perChat = 4;
    const db = new pg.Pool({ connectionString: database, max: 1 });
    const stored = async () =>
      Number((await db.query<{ n: string }>("SELECT count(*) AS n FROM palaver.inbound")).rows[0]?.n);
    try {
      for (let n = 1; n <= perChat; n++) {
        const round = Array.from({ length: chats }, (_, i) => i + 1).map((c) => ({
          c,
          msg: { content: `chat ${c} message ${n}`, chatId: `c${c}`, messageId: `${c}-${n}` },
        }));
        // Each message reaches one instance...
        for (const { c, msg } of round) (c % 2 ? a : b).channel.receive(msg);
        // ...and, once it is in, a third of them again on the other, as a platform's redelivery.
        await waitFor(async () => (await stored()) === chats * n, undefined, `round ${n} stored`);
        for (const { c, msg } of round) if ((c + n) % 3 === 0) (c % 2 ? b : a).channel.receive(msg);
      }
    } finally {
      await db.end();
    }
    const replies = (): OutboundMessage[] => [...a.channel.sent, ...b.channel.sent];
    await waitFor(() => replies().length >= chats * perChat, 60_000, "every message answered");
    // Nothing left to run: any second answer would have come by now.
    const check = new pg.Pool({ connectionString: database, max: 1 });
    try {
      await waitFor(async () => {
        const open = await check.query("SELECT 1 FROM palaver.inbound WHERE state <> 'done'");
        return open.rowCount === 0;
      });
    } finally {
      await check.end();
    }
    const all = replies();
    expect(all).toHaveLength(chats * perChat);
    for (let c = 1; c <= chats; c++) {
      const expected = Array.from({ length: perChat }, (_, i) => `chat ${c} message ${i + 1}`);
      // Answered once each...
      const answered = all.filter((m) => m.chatId === `c${c}`).map((m) => m.content.replace(/^re: /, ""));
      expect([...answered].sort()).toEqual(expected);
      // ...and the turns ran one after the other in the chat's order, whichever instance ran them.
      const asked = fake.requests.map(lastUserText).filter((t) => t.startsWith(`chat ${c} `));
      expect(asked).toEqual(expected);
    }
    expect(a.channel.sent.length).toBeGreaterThan(0);
    expect(b.channel.sent.length).toBeGreaterThan(0);
    // Each sees the other: /status's lines name both instances (read every few seconds).
    const [idA, idB] = [a.gateway.cluster!.instance, b.gateway.cluster!.instance];
    await waitFor(() => a.gateway.cluster!.statusLines().some((l) => l.includes(idB)), undefined, "a sees b");
    expect(a.gateway.cluster!.statusLines()[0]).toBe(`Cluster 2 instances alive: ${idA} (this one), ${idB}`);
    expect(a.gateway.cluster!.workspace?.kind).toBe("created");
    expect(b.gateway.cluster!.workspace?.kind).toBe("same");
  });

  it("/stop reaching the instance that does not run the chat's turn stops it where it runs", async () => {
    const database = await createDatabase();
    const a = await startInstance(database, "a");
    const b = await startInstance(database, "b");
    let release = () => {};
    const held = new Promise<void>((resolve) => (release = resolve));
    fake.setHandler(async (req) => {
      await held;
      return { content: `re: ${lastUserText(req)}` };
    });
    try {
      a.channel.receive({ content: "take your time", chatId: "c1", messageId: "1" });
      const key = "telegram:c1";
      await waitFor(
        () => a.gateway.agent.loop.runsTurnOf(key) || b.gateway.agent.loop.runsTurnOf(key),
        undefined,
        "the turn runs somewhere",
      );
      const [runner, other] = a.gateway.agent.loop.runsTurnOf(key) ? [a, b] : [b, a];
      other.channel.receive({ content: "/stop", chatId: "c1", messageId: "2" });
      await waitFor(() => runner.channel.sent.some((m) => /^Stopped/.test(m.content)), undefined, "stopped");
      await waitFor(() => !runner.gateway.agent.loop.runsTurnOf(key), undefined, "the turn ended");
      expect(other.channel.sent.map((m) => m.content)).toEqual([]);
    } finally {
      release();
    }
    // The stopped turn's answer never comes (its reply was cut off), and nothing says "Nothing is running".
    expect([...a.channel.sent, ...b.channel.sent].map((m) => m.content)).toEqual([
      expect.stringMatching(/^Stopped the running reply/),
    ]);
  });
});
