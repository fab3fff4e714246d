/**
 * The web chat on two instances sharing one PostgreSQL (web/pg-relay.ts over db/notify.ts): two
 * web channels on two ports, each with the real HTTP server and event streams. A message posted
 * on A whose turn runs on B (its ChannelManager drives B's channel) shows on A's tabs, in order
 * and once, big replies whole and files servable; after the relay's connections are cut, the
 * tabs are told to reload and later events arrive.
 */
import { mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { request as httpRequest, type IncomingMessage } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { createWebChannel } from "../../src/channels/web/adapter.js";
import { PgWebRelay } from "../../src/channels/web/pg-relay.js";
import { PgSharedToken } from "../../src/channels/web/pg-token.js";
import type { WebEvent } from "../../src/channels/web/protocol.js";
import type { Channel, InboundSink } from "../../src/channels/types.js";
import type { InboundMessage } from "../../src/bus/types.js";
import { ConfigSchema } from "../../src/config/schema.js";
import { HealthServer } from "../../src/daemon/health.js";
import { Metrics } from "../../src/daemon/metrics.js";
import { Notifier } from "../../src/db/notify.js";
import { type Database, openDatabase } from "../../src/db/pool.js";
import { logger, type Logger } from "../../src/log.js";
import { SessionStore } from "../../src/sessions/store.js";
import { cutConnections, postgresMissing, usePostgres } from "../helpers/postgres.js";
import { requireOrSkip } from "../helpers/requires.js";
import { captureLog } from "../helpers/log.js";
import { waitFor } from "../helpers/wait.js";

const testLog = logger("test");
const missing = requireOrSkip(postgresMissing());
const TOKEN = "relay-test-token-0123456789";
const BEARER = { authorization: `Bearer ${TOKEN}` };

interface Instance {
  base: string;
  channel: Channel;
  /** What its channel put on its (stand-in) bus. */
  inbound: InboundMessage[];
  close(): Promise<void>;
}

interface Tab {
  events: WebEvent[];
  /** The server ended the stream. */
  ended: boolean;
  res: IncomingMessage;
}

/** One gateway's web chat: its own HTTP server, state folder and notification connection; the workspace shared. */
interface InstanceOptions {
  /** channels.web.token ("" = made and kept, agreed through the database). */
  token?: string;
  /** Its logger (default: the test's). */
  log?: Logger;
  /** How long a notification waits for a broken connection to come back. */
  notifyTimeoutMs?: number;
}

async function startInstance(
  name: string,
  url: string,
  dir: string,
  { token = TOKEN, log = testLog, notifyTimeoutMs }: InstanceOptions = {},
): Promise<Instance> {
  const workspace = join(dir, "ws");
  const config = ConfigSchema.parse({
    agents: { defaults: { workspace } },
    channels: { web: { enabled: true, token } },
  });
  const db = openDatabase({ url, applicationName: `palaver ${name}`, log });
  const metrics = new Metrics({ queueDepth: () => 0, activeTurns: () => 0, activeSubagents: () => 0 });
  const http = new HealthServer({
    host: "127.0.0.1",
    port: 0,
    metrics,
    readiness: () => ({ ready: true, components: {} }),
    log,
  });
  await http.start();
  const notifier = new Notifier({
    url,
    instance: name,
    log,
    retryMs: 50,
    maxRetryMs: 200,
    ...(notifyTimeoutMs ? { timeoutMs: notifyTimeoutMs } : {}),
  });
  const channel = await createWebChannel({
    config,
    workspace,
    log,
    gateway: {
      http,
      sessions: new SessionStore(join(workspace, "sessions"), log),
      stateDir: join(dir, name),
      model: "fake-model",
      usageReport: () => {
        throw new Error("not asked in these tests");
      },
      webRelay: new PgWebRelay({ notifier, instance: name, log }),
      webToken: new PgSharedToken(db),
    },
  });
  const inbound: InboundMessage[] = [];
  const sink: InboundSink = {
    allows: () => true,
    publishInbound: (msg) => inbound.push(msg),
    refuse: () => undefined,
  };
  const lifetime = new AbortController();
  await channel.start(sink, lifetime.signal);
  return {
    base: http.url!,
    channel,
    inbound,
    async close() {
      lifetime.abort();
      await channel.stop();
      await notifier.close();
      await db.end();
      await http.stop();
    },
  };
}

async function openTab(base: string, conversation: string): Promise<Tab> {
  const res = await new Promise<IncomingMessage>((resolve, reject) => {
    const req = httpRequest(`${base}/api/events?conversation=${conversation}`, { headers: BEARER }, resolve);
    req.on("error", reject);
    req.end();
  });
  if (res.statusCode !== 200) throw new Error(`events: HTTP ${res.statusCode}`);
  const tab: Tab = { events: [], ended: false, res };
  let buffer = "";
  res.setEncoding("utf8");
  res.on("data", (text: string) => {
    buffer += text;
    let end: number;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const data = buffer
        .slice(0, end)
        .split("\n")
        .find((l) => l.startsWith("data: "));
      buffer = buffer.slice(end + 2);
      if (data) {
        const event = JSON.parse(data.slice(6)) as WebEvent;
        if (event.type !== "ping") tab.events.push(event);
      }
    }
  });
  res.on("close", () => (tab.ended = true));
  res.on("error", () => undefined);
  return tab;
}

function request(url: string, method = "GET", body?: unknown): Promise<{ status: number; body: Buffer }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      url,
      { method, headers: { ...BEARER, ...(body ? { "content-type": "application/json" } : {}) } },
      (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks) }));
        res.on("error", reject);
      },
    );
    req.on("error", reject);
    req.end(body ? JSON.stringify(body) : undefined);
  });
}

/** Waits for a `progress` event with `text` on every tab: everything published before it has arrived. */
async function marker(from: Instance, conversation: string, text: string, tabs: Tab[]): Promise<void> {
  await from.channel.send({ channel: "web", chatId: conversation, content: text, kind: "progress" });
  for (const tab of tabs) {
    await waitFor(
      () => tab.events.some((e) => e.type === "progress" && e.text === text),
      undefined,
      `"${text}" on a tab`,
    );
  }
}

const brief = (e: WebEvent) => {
  if (e.type === "ping") return "ping";
  const text = "text" in e ? `:${e.text.length > 20 ? `${e.text.length} chars` : e.text}` : "";
  return `${e.type}${text}`;
};

describe.skipIf(missing)("the web chat across two instances (real PostgreSQL)", () => {
  const { migratedDatabase } = usePostgres();
  let dir: string;
  let admin: Database | undefined;
  const instances: Instance[] = [];
  const tabs: Tab[] = [];

  afterEach(async () => {
    for (const tab of tabs.splice(0)) tab.res.destroy();
    await Promise.all(instances.splice(0).map((i) => i.close()));
    admin = undefined;
    await rm(dir, { recursive: true, force: true });
  });

  async function cluster(token?: string): Promise<[Instance, Instance]> {
    const { url, db } = await migratedDatabase();
    admin = db;
    dir = await mkdtemp(join(tmpdir(), "palaver-relay-"));
    const a = await startInstance("a", url, dir, token === undefined ? {} : { token });
    instances.push(a);
    const b = await startInstance("b", url, dir, token === undefined ? {} : { token });
    instances.push(b);
    return [a, b];
  }

  async function tab(instance: Instance, conversation: string): Promise<Tab> {
    const t = await openTab(instance.base, conversation);
    tabs.push(t);
    return t;
  }

  it("shows a turn that runs on B to the tabs on A, in order and once, and replays it to a tab opened on A mid-turn", async () => {
    const [a, b] = await cluster();
    const onA = await tab(a, "c1");
    const onB = await tab(b, "c1");
    const elsewhere = await tab(a, "c2");

    const sent = await request(`${a.base}/api/conversations/c1/messages`, "POST", { text: "hello" });
    expect(sent.status).toBe(202);
    expect(a.inbound.map((m) => m.content)).toEqual(["hello"]);
    // The turn runs on B once the message reached it (the queue's job); its tabs saw it too.
    await waitFor(() => onB.events.some((e) => e.type === "user"), undefined, "the user event on B");

    const place = { channel: "web", chatId: "c1", turnId: "t1" };
    b.channel.onTurn!({ kind: "turnStart", ...place });
    const preview = b.channel.previewSurface!({ chatId: "c1", turnId: "t1" })!;
    const ref = await preview.post("Hel", false);
    await preview.edit(ref, "Hello", false);
    await waitFor(
      () => onA.events.some((e) => e.type === "delta" && e.text === "Hello"),
      undefined,
      "the delta on A",
    );
    const late = await tab(a, "c1");
    await waitFor(() => late.events.length >= 3, undefined, "the replay on the late tab");
    expect(late.events.map(brief)).toEqual(["user:hello", "turnStart", "delta:Hello"]);
    // Either instance lists the conversation (no session yet), busy while B runs its turn.
    const listed = async (at: Instance) =>
      JSON.parse((await request(`${at.base}/api/conversations`)).body.toString("utf8")) as unknown;
    for (const at of [a, b]) {
      expect(await listed(at)).toEqual([expect.objectContaining({ id: "c1", title: "hello", busy: true })]);
    }

    await b.channel.send({ ...place, content: "Hello there", kind: "final" });
    b.channel.onTurn!({ kind: "turnEnd", ...place, outcome: "done" });
    await marker(b, "c1", "later", [onA, onB, late]);

    const turn = [
      "user:hello",
      "turnStart",
      "delta:Hel",
      "delta:Hello",
      "final:Hello there",
      "turnEnd",
      "progress:later",
    ];
    expect(onA.events.map(brief)).toEqual(turn);
    expect(onB.events.map(brief)).toEqual(turn);
    expect(late.events.map(brief)).toEqual(["user:hello", "turnStart", "delta:Hello", ...turn.slice(4)]);
    expect(onA.events[4]).toEqual({ type: "final", conversationId: "c1", turnId: "t1", text: "Hello there" });
    expect(await listed(a)).toEqual([expect.objectContaining({ id: "c1", busy: false })]);
    await marker(a, "c2", "other chat", [elsewhere]);
    expect(elsewhere.events.map(brief)).toEqual(["progress:other chat"]);
  });

  it("brings a reply bigger than a notification whole, in its place, with its workspace file servable on A", async () => {
    const [a, b] = await cluster();
    const onA = await tab(a, "c1");
    // Two bytes a character: 24000 bytes, three times what one notification may carry.
    const long = `${"é".repeat(12_000)}end`;
    const media = join(dir, "ws", "out");
    await mkdir(media, { recursive: true });
    await writeFile(join(media, "report.txt"), "the report");
    // Outside the shared workspace: B's own file, which A must not serve under B's id.
    await writeFile(join(dir, "b-only.txt"), "B's own");

    await b.channel.send({ channel: "web", chatId: "c1", content: "before", kind: "progress" });
    await b.channel.send({
      channel: "web",
      chatId: "c1",
      content: long,
      kind: "final",
      media: [join(media, "report.txt"), join(dir, "b-only.txt")],
    });
    await marker(b, "c1", "after", [onA]);

    expect(onA.events.map(brief)).toEqual(["progress:before", "final:12003 chars", "progress:after"]);
    const final = onA.events[1] as Extract<WebEvent, { type: "final" }>;
    expect(final.text).toBe(long);
    expect(final.files).toEqual([
      { id: expect.any(String) as unknown, name: "report.txt", bytes: 10 },
      { id: expect.any(String) as unknown, name: "b-only.txt", bytes: 7 },
    ]);
    const [report, own] = final.files!.map((f) => f.id!);
    const file = await request(`${a.base}/api/files/${report}`);
    expect(file.status).toBe(200);
    expect(file.body.toString("utf8")).toBe("the report");
    expect((await request(`${a.base}/api/files/${own}`)).status).toBe(404);
    expect((await request(`${b.base}/api/files/${own}`)).body.toString("utf8")).toBe("B's own");
  });

  it("ends A's streams when the relay lost its connection (the page reloads), and relays later events", async () => {
    const [a, b] = await cluster();
    const onA = await tab(a, "c1");
    await marker(b, "c1", "before", [onA]);

    expect(await cutConnections(admin!, "palaver % notify")).toBe(2);
    // Reconnected and listening again: it ends the streams, whose events may have been lost.
    await waitFor(() => onA.ended, undefined, "A's stream to end");

    const reopened = await tab(a, "c1");
    await marker(b, "c1", "after", [reopened]);
    expect(onA.events.map(brief)).toEqual(["progress:before"]);
    expect(reopened.events.map(brief)).toEqual(["progress:after"]);
  });

  it("signs a browser in on every instance with one login when the token is made, not configured", async () => {
    const [a, b] = await cluster("");
    const kept = async (name: string) => (await readFile(join(dir, name, "web", "token"), "utf8")).trim();
    const token = await kept("a");
    expect(await kept("b")).toBe(token);
    const login = await new Promise<string>((resolve, reject) => {
      const req = httpRequest(
        `${a.base}/api/login`,
        { method: "POST", headers: { origin: a.base, "content-type": "application/json" } },
        (res) => {
          res.resume();
          if (res.statusCode !== 204) reject(new Error(`login: HTTP ${res.statusCode}`));
          else resolve(String(res.headers["set-cookie"]?.[0] ?? "").split(";")[0]!);
        },
      );
      req.on("error", reject);
      req.end(JSON.stringify({ token }));
    });
    const me = await new Promise<number>((resolve, reject) => {
      const req = httpRequest(`${b.base}/api/me`, { headers: { cookie: login } }, (res) => {
        res.resume();
        resolve(res.statusCode ?? 0);
      });
      req.on("error", reject);
      req.end();
    });
    expect(me).toBe(200);
  });

  it("tells every instance's tabs to reload when B's events could not be sent, once B is back", async () => {
    const { url, db: admin } = await migratedDatabase();
    dir = await mkdtemp(join(tmpdir(), "palaver-relay-"));
    // B logs in as a role of its own, so B alone can be kept out for a while.
    await admin.query("CREATE ROLE b LOGIN");
    const a = await startInstance("a", url, dir);
    instances.push(a);
    const captured = captureLog();
    const b = await startInstance("b", url.replace("postgres@", "b@"), dir, {
      log: captured.log,
      notifyTimeoutMs: 2000,
    });
    instances.push(b);
    const onA = await tab(a, "c1");
    expect((await request(`${a.base}/api/conversations/c1/messages`, "POST", { text: "hi" })).status).toBe(
      202,
    );
    const place = { channel: "web", chatId: "c1", turnId: "t1" };
    b.channel.onTurn!({ kind: "turnStart", ...place });
    await marker(b, "c1", "before", [onA]);
    const busy = async () => {
      const list = JSON.parse(
        (await request(`${a.base}/api/conversations`)).body.toString("utf8"),
      ) as unknown;
      return (list as { id: string; busy: boolean }[]).find((c) => c.id === "c1")?.busy;
    };
    expect(await busy()).toBe(true);

    await admin.query("ALTER ROLE b NOLOGIN");
    await cutConnections(admin, "palaver b notify");
    await b.channel.send({ channel: "web", chatId: "c1", content: "lost", kind: "progress" });
    b.channel.onTurn!({ kind: "turnEnd", ...place, outcome: "done" });
    await waitFor(
      () => captured.lines.some((l) => String(l.msg).startsWith("web relay: events could not reach")),
      undefined,
      "B to give up sending",
    );
    expect(onA.ended).toBe(false);
    await admin.query("ALTER ROLE b LOGIN");
    await waitFor(() => onA.ended, undefined, "A's stream to end");
    // Its turnEnd was lost: A forgot the turn rather than show it running until the next one.
    expect(await busy()).toBe(false);

    const reopened = await tab(a, "c1");
    await marker(b, "c1", "after", [reopened]);
    expect(onA.events.map(brief)).toEqual(["user:hi", "turnStart", "progress:before"]);
    // The replay has no running turn any more, and the message it answered went with it.
    expect(reopened.events.map(brief)).toEqual(["progress:after"]);
  });
});
