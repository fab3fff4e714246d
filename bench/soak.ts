/**
 * Soak: the real `palaver gateway` (dist/main.js) with Telegram, Slack (Socket Mode), Discord and
 * the web chat, all against the loopback fakes, takes SOAK_MESSAGES messages (default 100,000)
 * over CHATS_PER_PLATFORM chats on each (WEB_CONVERSATIONS in the web chat, which takes 60 messages a
 * minute), in rounds of one message per chat. The fake LLM runs in
 * its own process and streams its answers (streaming on); every TOOL_EVERY-th message asks for a
 * tool call first; a cron job fires every CRON_EVERY_S seconds into a Telegram chat of its own.
 *
 * Every SAMPLE_EVERY messages, at a quiet moment, the gateway's heap and RSS after a full garbage
 * collection (bench/heap-probe.mjs, preloaded into the child with --expose-gc), its /metrics (heap
 * used as found, open fds, active handles and resources, listeners on `process`) and its
 * /proc/<pid>/fd are sampled. The result is their growth from the BASELINE-th message to the last
 * (each the median of SAMPLES_PER_POINT samples there) and that every message got exactly one
 * reply: the final text of each platform's messages ("ok <id>.") counted by id, a second message
 * with the same id counted as a repeat.
 *
 * The heap is judged after a GC: heap used as found swings by half between two collections. RSS is
 * reported, not judged: it follows the heap V8 has reserved (heapTotal) and what malloc keeps, which
 * neither gives back promptly; a leak shows in the heap after GC first.
 *
 * SOAK_SNAPSHOTS=10000,50000 also writes a heap snapshot at those messages (into SOAK_SNAPSHOT_DIR,
 * the working folder by default) to see what grew.
 */
import { execFileSync, type ChildProcess } from "node:child_process";
import { readdirSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { FakeDiscord, type FakeUser as DiscordUser } from "../tests/fakes/discord-server.js";
import { dmEvent, FakeSlack } from "../tests/fakes/slack-server.js";
import { FakeTelegram } from "../tests/fakes/telegram-server.js";
import { DIST_MAIN, ensureBuilt } from "../tests/helpers/dist.js";
import { writeGatewayConfig } from "../tests/helpers/gateway-process.js";
import { spawnGateway, type Entry } from "./gateway-child.js";
import { median } from "./measure.js";
import { startLlmProcess } from "./helpers.js";
import type { BenchResult } from "./types.js";

const TOTAL = Number(process.env.SOAK_MESSAGES ?? 100_000);
const CHATS_PER_PLATFORM = 25;
/** The web chat accepts 60 messages a minute from its one user: a few conversations, below that. */
const WEB_CONVERSATIONS = 5;
const WEB_PER_MINUTE = 50;
const CHATS = CHATS_PER_PLATFORM * 3 + WEB_CONVERSATIONS;
const BASELINE = Math.min(10_000, Math.floor(TOTAL / 2));
const SAMPLE_EVERY = 1000;
const SAMPLES_PER_POINT = 3;
const TOOL_EVERY = 10;
const CRON_EVERY_S = 10;
const CRON_CHAT = 9999;
const ROUND_TIMEOUT_MS = 60_000;
const HEAP_GROWTH_TARGET = 10;
/** Open fds, handles and listeners may differ by a few (a pooled connection open or not). */
const COUNT_GROWTH_SLACK = 10;
const WEB_TOKEN = "bench-soak-web-token-0123456789ab";
const FINAL = /^ok (\d+)\.$/;
const HEAP_PROBE = resolve(import.meta.dirname, "heap-probe.mjs");
const PROBE_TIMEOUT_MS = 120_000;
const SNAPSHOTS_AT = (process.env.SOAK_SNAPSHOTS ?? "").split(",").filter(Boolean).map(Number);
const SNAPSHOT_DIR = process.env.SOAK_SNAPSHOT_DIR ?? process.cwd();

export const TARGET =
  `${TOTAL.toLocaleString("en")} messages over ${CHATS} chats (Telegram, Slack, Discord, web; streaming, tools, cron): ` +
  `heap after GC grows < ${HEAP_GROWTH_TARGET} % from message ${BASELINE.toLocaleString("en")} to the last, open fds, ` +
  `handles and listeners within ${COUNT_GROWTH_SLACK}, every message answered exactly once`;

interface Sample {
  at: number;
  rss: number;
  /** After a full GC: what is still reachable. */
  heapAfterGc: number;
  heapTotal: number;
  /** As /metrics found it, wherever the collector was. */
  heapUsed: number;
  fds: number;
  handles: number;
  resources: number;
  listeners: number;
}

interface HeapReport {
  type: "heap";
  id: number;
  heapUsed: number;
  heapTotal: number;
  rss: number;
  snapshot?: string;
}

let heapRequests = 0;

/** The heap probe's answer: heap and RSS after a full GC (and a heap snapshot written to `snapshot`). */
function heapAfterGc(child: ChildProcess, snapshot?: string): Promise<HeapReport> {
  const id = ++heapRequests;
  return new Promise((resolve, reject) => {
    const onMessage = (msg: HeapReport) => {
      if (msg.type !== "heap" || msg.id !== id) return;
      clearTimeout(timer);
      child.off("message", onMessage);
      resolve(msg);
    };
    const timer = setTimeout(() => {
      child.off("message", onMessage);
      reject(new Error(`no answer from the gateway's heap probe within ${PROBE_TIMEOUT_MS} ms`));
    }, PROBE_TIMEOUT_MS);
    child.on("message", onMessage);
    child.send({ type: "heap", id, snapshot });
  });
}

/** The value of an unlabelled metric in Prometheus text. */
function metric(text: string, name: string): number {
  const m = new RegExp(`^${name} (\\S+)$`, "m").exec(text);
  if (!m) throw new Error(`no ${name} in /metrics`);
  return Number(m[1]);
}

async function sample(url: string, child: ChildProcess, at: number, snapshot?: string): Promise<Sample> {
  // /metrics first: its heap used is the one as found, before the probe's collection.
  const text = await (await fetch(`${url}/metrics`)).text();
  const heap = await heapAfterGc(child, snapshot);
  if (heap.snapshot) process.stderr.write(`soak: heap snapshot at message ${at}: ${heap.snapshot}\n`);
  return {
    at,
    rss: heap.rss,
    heapAfterGc: heap.heapUsed,
    heapTotal: heap.heapTotal,
    heapUsed: metric(text, "palaver_nodejs_heap_size_used_bytes"),
    // Counted here too, from outside: /metrics could only report what the process sees.
    fds: readdirSync(`/proc/${child.pid}/fd`).length,
    handles: metric(text, "palaver_nodejs_active_handles_total"),
    resources: metric(text, "palaver_nodejs_active_resources_total"),
    listeners: metric(text, "palaver_process_listeners"),
  };
}

/** Replies seen per message id, over all platforms. */
class ReplyCount {
  readonly perId = new Map<number, number>();
  /** The round being answered now. */
  round = 0;
  /** Platform objects already counted, and in which round (a final seen again is not a new reply). */
  private readonly countedIn = new WeakMap<object, number>();

  see(text: string | undefined, obj?: object): void {
    const id = FINAL.exec(text ?? "")?.[1];
    if (id === undefined) return;
    if (obj) {
      if (this.countedIn.has(obj)) return;
      this.countedIn.set(obj, this.round);
    }
    this.perId.set(Number(id), (this.perId.get(Number(id)) ?? 0) + 1);
  }

  /**
   * Takes out of a fake's list what was counted two rounds ago or earlier: final, and no longer
   * needed for a later edit, so each scan stays short.
   */
  forgetOld<T extends object>(list: T[]): void {
    const keep = list.filter((x) => (this.countedIn.get(x) ?? Infinity) > this.round - 2);
    list.splice(0, list.length, ...keep);
  }
}

/** One web chat conversation: its id and the final texts its event stream delivered. */
async function openConversation(url: string, count: ReplyCount, signal: AbortSignal): Promise<string> {
  const auth = { authorization: `Bearer ${WEB_TOKEN}` };
  const res = await fetch(`${url}/api/conversations`, { method: "POST", headers: auth });
  const { id } = (await res.json()) as { id: string };
  const events = await fetch(`${url}/api/events?conversation=${id}`, { headers: auth, signal });
  const reader = events.body!.pipeThrough(new TextDecoderStream()).getReader();
  void (async () => {
    let buffer = "";
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) return;
        buffer += value;
        let end;
        while ((end = buffer.indexOf("\n\n")) >= 0) {
          const data = /^data: (.*)$/m.exec(buffer.slice(0, end))?.[1];
          buffer = buffer.slice(end + 2);
          const event = data ? (JSON.parse(data) as { type: string; text?: string }) : undefined;
          if (event?.type === "final") count.see(event.text);
        }
      }
    } catch {
      // aborted at the end
    }
  })();
  return id;
}

export async function benchSoak(): Promise<BenchResult> {
  const buildProblem = ensureBuilt();
  const entry: Entry = buildProblem ? "tsx" : "dist";
  const dir = await mkdtemp(join(tmpdir(), "palaver-bench-soak-"));
  const llm = await startLlmProcess("soak-llm-server.ts", []);
  const tg = await FakeTelegram.start();
  const slack = await FakeSlack.start();
  const discord = await FakeDiscord.start();
  const configPath = await writeGatewayConfig(
    dir,
    { llmBaseURL: llm.baseURL, telegram: tg, slack, discord },
    {
      channels: { streaming: true, web: { enabled: true, token: WEB_TOKEN } },
      agents: { defaults: { maxConcurrentTurns: 20 } },
    },
  );
  execFileSync(
    process.execPath,
    [
      DIST_MAIN,
      "cron",
      "add",
      "--config",
      configPath,
      "--message",
      "tick",
      "--every",
      String(CRON_EVERY_S),
    ].concat(["--channel", "telegram", "--to", String(CRON_CHAT)]),
    { cwd: dir, env: { PATH: process.env.PATH, HOME: dir }, stdio: "ignore" },
  );
  const gateway = spawnGateway(entry, configPath, dir, {
    nodeArgs: ["--expose-gc", "--import", pathToFileURL(HEAP_PROBE).href],
    ipc: true,
  });
  const lifetime = new AbortController();
  let stopped = false;
  const count = new ReplyCount();
  try {
    const url = await gateway.healthUrl(30_000);
    await tg.waitForCall(
      "getUpdates",
      (c) => typeof c.params.timeout === "number" && c.params.timeout > 0,
      30_000,
    );
    await slack.waitForConnections(1, 30_000);
    await discord.waitFor(() => discord.connections.length > 0, 30_000, "the Discord gateway connection");
    const discordUsers: { user: DiscordUser; channelId: string }[] = [];
    for (let i = 0; i < CHATS_PER_PLATFORM; i++) {
      const user = discord.addUser(`user${i}`);
      discordUsers.push({ user, channelId: discord.dmChannel(user).id });
    }
    const conversations: string[] = [];
    for (let i = 0; i < WEB_CONVERSATIONS; i++)
      conversations.push(await openConversation(url, count, lifetime.signal));

    /** Counts the final texts the fakes hold now. */
    const harvest = () => {
      for (const s of tg.sent) if (s.chatId !== CRON_CHAT) count.see(s.text, s);
      for (const list of slack.messages.values()) for (const m of list) if (m.bot_id) count.see(m.text, m);
      for (const s of discord.sent) count.see(s.message.content, s);
    };
    let cronTicks = 0;
    /** Empties the fakes' records (nothing reads them back) and their messages counted rounds ago. */
    const forget = (before: number) => {
      tg.calls.splice(0);
      tg.shown.splice(0);
      slack.calls.splice(0);
      slack.shown.splice(0);
      slack.acks.splice(0);
      discord.requests.splice(0);
      discord.frames.splice(0);
      discord.shown.splice(0);
      const ticks = tg.sent.filter((s) => s.chatId === CRON_CHAT && s.at < before);
      cronTicks += ticks.filter((s) => s.text === "tick.").length;
      const done = new Set(ticks);
      count.forgetOld(tg.sent);
      tg.sent.splice(0, tg.sent.length, ...tg.sent.filter((s) => !done.has(s)));
      for (const list of slack.messages.values()) count.forgetOld(list);
      count.forgetOld(discord.sent);
    };

    const samples: Sample[] = [];
    let sent = 0;
    const webSentAt: number[] = [];
    const started = performance.now();
    let previousRoundAt = Date.now();
    const inFlight: number[][] = [];
    let nextSample = SAMPLE_EVERY;
    let nextProgress = 10_000;
    /** Resolves once every message of `ids` has its reply; throws after ROUND_TIMEOUT_MS. */
    const answered = async (ids: number[]) => {
      const deadline = Date.now() + ROUND_TIMEOUT_MS;
      for (;;) {
        harvest();
        if (ids.every((id) => count.perId.has(id))) return;
        if (Date.now() > deadline) {
          const missing = ids.filter((id) => !count.perId.has(id));
          throw new Error(
            `no reply within ${ROUND_TIMEOUT_MS} ms to ${missing.length} messages: ${missing.slice(0, 10).join(", ")}`,
          );
        }
        // Polled: the replies come to four fakes by four routes, and a bench may sleep.
        await new Promise((r) => setTimeout(r, 10));
      }
    };
    while (sent < TOTAL) {
      const roundAt = Date.now();
      const ids: number[] = [];
      const say = (): number => {
        const id = ++sent;
        ids.push(id);
        return id;
      };
      const text = (id: number) => `m${id}${id % TOOL_EVERY === 0 ? " tool" : ""}`;
      for (let i = 0; i < CHATS_PER_PLATFORM && sent < TOTAL; i++) {
        tg.userMessage({ text: text(say()), from: { id: 2001 + i, first_name: `user${i}` } });
      }
      for (let i = 0; i < CHATS_PER_PLATFORM && sent < TOTAL; i++) {
        void slack.pushEvent(dmEvent(text(say()), { channel: `D${100 + i}`, user: `U${100 + i}` }));
      }
      for (const { user, channelId } of discordUsers) {
        if (sent >= TOTAL) break;
        discord.userMessage({ channelId, author: user, content: text(say()) });
      }
      for (const id of conversations) {
        // The web chat takes WEB_PER_MINUTE messages a minute (a guard rail of its own): no more.
        while (webSentAt.length && webSentAt[0]! < Date.now() - 60_000) webSentAt.shift();
        if (sent >= TOTAL || webSentAt.length >= WEB_PER_MINUTE) break;
        webSentAt.push(Date.now());
        const res = await fetch(`${url}/api/conversations/${id}/messages`, {
          method: "POST",
          headers: { authorization: `Bearer ${WEB_TOKEN}`, "content-type": "application/json" },
          body: JSON.stringify({ text: text(say()) }),
        });
        if (res.status !== 202)
          throw new Error(`the web chat refused a message: ${res.status} ${await res.text()}`);
      }
      // Two rounds in flight: each chat has its next message queued while the last is answered.
      inFlight.push(ids);
      if (inFlight.length > 1) await answered(inFlight.shift()!);
      forget(previousRoundAt);
      previousRoundAt = roundAt;
      count.round++;
      if (sent >= nextSample) {
        // At a quiet moment: handles and fds counted mid-round say how much is in flight, not what leaks.
        for (const ids of inFlight.splice(0)) await answered(ids);
        const snapshot = SNAPSHOTS_AT.find((n) => n <= sent && n > sent - SAMPLE_EVERY);
        const file = snapshot && join(SNAPSHOT_DIR, `soak-${snapshot}.heapsnapshot`);
        samples.push(await sample(url, gateway.child, sent, file || undefined));
        nextSample += SAMPLE_EVERY;
      }
      if (sent >= nextProgress) {
        process.stderr.write(
          `soak: ${sent} messages, ${((performance.now() - started) / 1000).toFixed(0)} s\n`,
        );
        nextProgress += 10_000;
      }
    }
    for (const ids of inFlight) await answered(ids);
    const elapsedS = (performance.now() - started) / 1000;
    // Lost or repeated replies: counted once the gateway has stopped (nothing more can arrive).
    const code = await gateway.stop(30_000);
    stopped = true;
    harvest();
    forget(Date.now() + 1);
    if (code !== 0) console.error(`gateway exited with ${code}:\n${gateway.stderr.slice(-2000)}`);

    const atBaseline = samples.filter((s) => s.at >= BASELINE).slice(0, SAMPLES_PER_POINT);
    const atEnd = samples.slice(-SAMPLES_PER_POINT);
    const point = (list: Sample[], key: keyof Sample) => median(list.map((s) => s[key]));
    const growth = (key: keyof Sample) => {
      const from = point(atBaseline, key);
      const to = point(atEnd, key);
      return { from, to, delta: to - from, pct: from === 0 ? 0 : ((to - from) / from) * 100 };
    };
    const mb = (b: number) => (b / 2 ** 20).toFixed(1);
    const rss = growth("rss");
    const heap = growth("heapAfterGc");
    const heapTotal = growth("heapTotal");
    const heapFound = growth("heapUsed");
    const counts = (["fds", "handles", "resources", "listeners"] as const).map((k) => ({ k, ...growth(k) }));
    let lost = 0;
    let repeated = 0;
    for (let id = 1; id <= TOTAL; id++) {
      const n = count.perId.get(id) ?? 0;
      if (n === 0) lost++;
      if (n > 1) repeated++;
    }
    const flat = counts.every((c) => c.delta <= COUNT_GROWTH_SLACK);
    return {
      name: "soak",
      target: TARGET,
      value:
        `${TOTAL} messages in ${elapsedS.toFixed(0)} s (${(TOTAL / elapsedS).toFixed(0)} msg/s), ${cronTicks} cron runs; ` +
        `from message ${atBaseline[0]?.at ?? "?"} to ${TOTAL}: RSS ${mb(rss.from)} → ${mb(rss.to)} MB (${rss.pct.toFixed(1)} %), ` +
        `heap after GC ${mb(heap.from)} → ${mb(heap.to)} MB (${heap.pct.toFixed(1)} %), ` +
        `heap total ${mb(heapTotal.from)} → ${mb(heapTotal.to)} MB, heap used as found ${mb(heapFound.from)} → ${mb(heapFound.to)} MB, ` +
        counts.map((c) => `${c.k} ${c.from} → ${c.to}`).join(", ") +
        `; ${lost} unanswered, ${repeated} answered more than once` +
        (entry === "tsx" ? `; from src via tsx (${buildProblem})` : ""),
      pass: heap.pct < HEAP_GROWTH_TARGET && flat && lost === 0 && repeated === 0,
    };
  } catch (err) {
    console.error(`gateway log (tail):\n${gateway.stderr.slice(-3000)}`);
    throw err;
  } finally {
    lifetime.abort();
    if (!stopped) await gateway.stop(30_000);
    await tg.close();
    await slack.close();
    await discord.close();
    await llm.close();
    await rm(dir, { recursive: true, force: true });
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href) {
  const result = await benchSoak();
  console.log(`${result.pass ? "PASS" : "FAIL"}  ${result.value}\n      target: ${result.target}`);
}
