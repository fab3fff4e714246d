/**
 * The test that proves cluster mode (issue 36): three `palaver gateway` processes and one
 * PostgreSQL on loopback; Telegram by long polling (one instance holds the lease) and Slack in HTTP
 * mode (events posted to every instance); a fake LLM taking 300–800 ms per call; 200 chats × 10
 * numbered messages, sent all at once; 10 % of them delivered twice (Slack: to two instances;
 * Telegram: the same message again); 20 % of turns call a side-effecting tool (a shell command
 * appending its marker to a file); a cron job every 10 s throughout. The instance holding the
 * Telegram lease is killed with -9 at 40 % of the replies, and restarted at 70 % (or left dead).
 *
 * Pass: every message answered at most once, and every one but those whose reply the killed
 * instance claimed and never sent (docs/cluster.md: replies go out at most once), each chat's
 * replies in order, every side effect at most once per call, each cron run fired once, no
 * conversation left waiting longer than the turn timeout + 10 s after the kill, every instance did
 * work, and nothing left in the queue.
 */
import { mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { FakeOpenAI, lastUserText, type RecordedRequest } from "../fakes/openai-server.js";
import { dmEvent, FakeSlack } from "../fakes/slack-server.js";
import { FakeTelegram } from "../fakes/telegram-server.js";
import { runCli, startCli, type RunningCli } from "../helpers/cli.js";
import { gatewayConfig } from "../helpers/gateway-process.js";
import { freePort, postgresMissing, startPostgres, type TestPostgres } from "../helpers/postgres.js";
import { requireOrSkip } from "../helpers/requires.js";
import { INGRESS_LEASES, leaseHolders } from "../../src/db/lease.js";
import { waitFor } from "../helpers/wait.js";

const missing = requireOrSkip(postgresMissing());

const CHATS_PER_PLATFORM = 100;
const PER_CHAT = 10;
const TOTAL = CHATS_PER_PLATFORM * 2 * PER_CHAT;
const TURN_TIMEOUT_S = 10;
const SECRET = "chaos-signing-secret";
/** A message's text, and the marker its tool call writes. */
const text = (chat: string, n: number) => `${chat} says ${n}`;
const parse = (t: string) => /^(\S+) says (\d+)$/.exec(t);
/** Every fifth message's turn runs the side-effecting tool (stable, so a retried turn asks for it again). */
const withTool = (chat: string, n: number) => (chat.length + n * 7) % 5 === 0;
/** Every tenth message is delivered twice. */
const twice = (i: number, n: number) => (i * 3 + n) % 10 === 0;

/** The job id `palaver cron add` printed. */
function cronId(stdout: string): string {
  const id = /Added job (\S+) /.exec(stdout)?.[1];
  if (!id) throw new Error(`no job id in: ${stdout}`);
  return id;
}

describe.skipIf(missing)("cluster mode under chaos: 3 gateways, one killed", () => {
  let server: TestPostgres;
  let dir: string;
  let llm: FakeOpenAI;
  let tg: FakeTelegram;
  let slack: FakeSlack;
  const children: RunningCli[] = [];

  beforeAll(async () => {
    server = await startPostgres();
  });
  afterAll(async () => {
    await server?.stop();
  });
  afterEach(async () => {
    for (const child of children.splice(0)) {
      if (child.child.exitCode === null && child.child.signalCode === null) child.child.kill("SIGKILL");
      await child.exited.catch(() => undefined);
    }
    await Promise.all([llm?.close(), tg?.close(), slack?.close()]);
    await rm(dir, { recursive: true, force: true });
  });

  for (const restart of [true, false]) {
    it(
      `answers 2,000 messages once each, in order, the lease holder killed${restart ? " and restarted" : " for good"}`,
      async () => {
        dir = await mkdtemp(join(tmpdir(), "palaver-chaos-"));
        const database = await server.createDatabase();
        llm = await FakeOpenAI.start();
        tg = await FakeTelegram.start();
        slack = await FakeSlack.start();
        // Slack sends an event again at once, then after 1 and 5 minutes; a loaded machine can miss
        // the 3 s window, and the test should not wait minutes for the retry that follows.
        slack.httpRetryDelaysMs = [0, 5_000, 15_000];
        const calls = join(dir, "ws", "calls.log");
        await mkdir(join(dir, "ws"), { recursive: true });
        await writeFile(calls, "");
        llm.setHandler((req: RecordedRequest) => {
          const delayMs = 300 + Math.floor(Math.random() * 500);
          const asked = lastUserText(req);
          const m = parse(asked);
          // This turn's tool call already made: a tool result after the last user message.
          const lastUser = req.body.messages.map((msg) => msg.role).lastIndexOf("user");
          const toolDone = req.body.messages.slice(lastUser).some((msg) => msg.role === "tool");
          if (m && withTool(m[1]!, Number(m[2])) && !toolDone) {
            return {
              delayMs,
              toolCalls: [{ name: "exec", arguments: { command: `echo ${m[1]}-${m[2]} >> calls.log` } }],
            };
          }
          return { delayMs, content: m ? `re: ${asked}` : `tick: ${asked.slice(0, 40)}` };
        });

        // One config per instance (its own state folder and Slack port), one workspace, one database.
        const slackPorts = await Promise.all([0, 1, 2].map(() => freePort()));
        const configs = await Promise.all(
          [0, 1, 2].map(async (i) => {
            const own = join(dir, `i${i}`);
            await mkdir(own, { recursive: true });
            const config = gatewayConfig(
              dir,
              { llmBaseURL: llm.baseURL, telegram: tg },
              {
                agents: { defaults: { maxConcurrentTurns: 16 } },
                channels: {
                  slack: {
                    enabled: true,
                    mode: "http",
                    botToken: slack.botToken,
                    signingSecret: SECRET,
                    port: slackPorts[i],
                    apiUrl: slack.apiUrl,
                    allowFrom: ["*"],
                  },
                },
                tools: { exec: { sandbox: "off" } },
                cluster: { database, turnTimeoutSeconds: TURN_TIMEOUT_S },
              },
            );
            const path = join(own, "config.json");
            await writeFile(path, JSON.stringify(config));
            return path;
          }),
        );
        const spawn = (i: number): RunningCli => {
          const run = startCli(["gateway", "--config", configs[i]!], {
            cwd: dir,
            env: { HOME: dir },
            timeoutMs: 15 * 60_000,
          });
          children.push(run);
          return run;
        };
        // A cron job every 10 s for the whole run, added before the instances start.
        const cron = await runCli(
          [
            "cron",
            "add",
            "--config",
            configs[0]!,
            "--every",
            "10",
            "--message",
            "cron tick",
            "--channel",
            "telegram",
            "--to",
            "999",
          ],
          { cwd: dir, env: { HOME: dir } },
        );
        expect(cron.code, cron.stderr).toBe(0);

        let gateways = [0, 1, 2].map(spawn);
        const db = new pg.Pool({ connectionString: database, max: 2 });
        try {
          await waitFor(
            async () =>
              (await db.query("SELECT 1 FROM palaver.instances WHERE stopped_at IS NULL")).rowCount === 3,
            60_000,
            "three instances registered",
          );
          const holder = async () =>
            (await leaseHolders(db, [INGRESS_LEASES.telegram])).get(INGRESS_LEASES.telegram);
          await waitFor(
            async () => (await holder()) !== undefined,
            60_000,
            "someone holds the Telegram lease",
          );
          for (const u of Array.from({ length: CHATS_PER_PLATFORM }, (_, i) => i))
            slack.users.set(`U${u}`, { name: `user${u}` });

          // Every message of every chat, at once (the Slack posts one after the other per chat).
          // Slack posts to the instances alive, as a load balancer checking their health does.
          const alive = [0, 1, 2];
          const target = (k: number) => ({
            url: `http://127.0.0.1:${slackPorts[alive[k % alive.length]!]}/slack/events`,
            signingSecret: SECRET,
          });
          const slackSends: Promise<unknown>[] = [];
          for (let n = 1; n <= PER_CHAT; n++) {
            for (let i = 0; i < CHATS_PER_PLATFORM; i++) {
              const from = { id: 5000 + i, first_name: `u${i}` };
              const message = tg.userMessage({ from, text: text(`tg${i}`, n) });
              if (twice(i, n)) tg.pushUpdate({ message });
            }
          }
          for (let i = 0; i < CHATS_PER_PLATFORM; i++) {
            slackSends.push(
              (async () => {
                for (let n = 1; n <= PER_CHAT; n++) {
                  const event = dmEvent(text(`sl${i}`, n), { channel: `D${i}`, user: `U${i}` });
                  const first = i + n;
                  // The platform retries on another instance too: the same event to two. Each
                  // attempt goes to an instance alive then, as through a load balancer.
                  await Promise.all([
                    slack.sendEventOverHttp((attempt) => target(first + attempt), event),
                    ...(twice(i, n)
                      ? [slack.sendEventOverHttp((attempt) => target(first + 1 + attempt), event)]
                      : []),
                  ]);
                }
              })(),
            );
          }

          const answers = (): { chat: string; n: number }[] => [
            ...tg.sent.flatMap((m) => {
              const p = parse((m.text ?? "").replace(/^re: /, ""));
              return p ? [{ chat: p[1]!, n: Number(p[2]) }] : [];
            }),
            ...slack.delivered().flatMap((d) => {
              const p = parse(d.text.replace(/^re: /, ""));
              return p ? [{ chat: p[1]!, n: Number(p[2]) }] : [];
            }),
          ];
          await waitFor(() => answers().length >= TOTAL * 0.4, 5 * 60_000, "40 % answered");
          // Kill the instance holding the Telegram lease, as a host dies.
          const held = await holder();
          const victim = gateways.findIndex((g) => g.stderr.includes(`"instance":"${held}"`));
          expect(victim).toBeGreaterThanOrEqual(0);
          alive.splice(alive.indexOf(victim), 1);
          gateways[victim]!.child.kill("SIGKILL");
          await gateways[victim]!.exited;
          const killedAt = (await db.query<{ now: Date }>("SELECT now()")).rows[0]!.now;
          if (restart) {
            await waitFor(() => answers().length >= TOTAL * 0.7, 5 * 60_000, "70 % answered");
            gateways = gateways.map((g, i) => (i === victim ? spawn(i) : g));
            await gateways[victim]!.stderrIncludes("gateway running");
            alive.push(victim);
          }
          await Promise.all(slackSends);
          // A reply the killed instance claimed in the outbox and never confirmed is taken as sent
          // (docs/cluster.md: at most once); if it died before the request left, that message stays
          // unanswered. Those, and only those, may be missing.
          const lostInKill = async (): Promise<Set<string>> => {
            const rows = await db.query<{ message: { content?: string } }>(
              "SELECT message FROM palaver.outbox WHERE state = 'pending' AND sent_by = $1",
              [held],
            );
            const lost = new Set<string>();
            for (const r of rows.rows) {
              const p = parse((r.message.content ?? "").replace(/^re: /, ""));
              if (p) lost.add(`${p[1]}-${p[2]}`);
            }
            return lost;
          };
          const answeredKeys = () => new Set(answers().map(({ chat, n }) => `${chat}-${n}`));
          await waitFor(
            async () => new Set([...answeredKeys(), ...(await lostInKill())]).size >= TOTAL,
            10 * 60_000,
            "every message answered",
          );
          // The cron job stops (through any instance's store), so its runs can be counted.
          const removed = await runCli(["cron", "remove", "--config", configs[0]!, cronId(cron.stdout)], {
            cwd: dir,
            env: { HOME: dir },
          });
          expect(removed.code, removed.stderr).toBe(0);
          await waitFor(
            async () =>
              (await db.query("SELECT 1 FROM palaver.inbound WHERE state <> 'done'")).rowCount === 0,
            undefined,
            "the queue empty",
          );

          // At most once and in order, per chat; a missing answer only where the kill lost its reply.
          const lost = await lostInKill();
          const byChat = new Map<string, number[]>();
          for (const { chat, n } of answers()) byChat.set(chat, [...(byChat.get(chat) ?? []), n]);
          expect(byChat.size).toBe(CHATS_PER_PLATFORM * 2);
          const wrong = [...byChat].filter(([chat, ns]) => {
            const expected = Array.from({ length: PER_CHAT }, (_, k) => k + 1).filter(
              (n) => ns.includes(n) || !lost.has(`${chat}-${n}`),
            );
            return ns.join() !== expected.join();
          });
          expect(JSON.stringify(wrong)).toBe("[]");

          // Side effects at most once per call. A call the killed instance had started and not
          // finished is not run again (the model is told it may or may not have taken effect), so
          // its marker may be missing: only those.
          const markers = (await readFile(calls, "utf8")).split("\n").filter(Boolean);
          expect(markers.length).toBe(new Set(markers).size);
          const expected = [...byChat.keys()].flatMap((chat) =>
            Array.from({ length: PER_CHAT }, (_, k) => k + 1)
              .filter((n) => withTool(chat, n))
              .map((n) => `${chat}-${n}`),
          );
          const interrupted = (
            await db.query<{ args: string }>("SELECT args FROM palaver.tool_calls WHERE state = 'started'")
          ).rows.map((r) => /echo (\S+) >>/.exec(r.args)?.[1]);
          const missing = expected.filter((m) => !markers.includes(m));
          expect(missing.filter((m) => !interrupted.includes(m))).toEqual([]);
          expect(markers.filter((m) => !expected.includes(m))).toEqual([]);

          // Each cron run fired once: one row per run, one reply per run in the job's chat.
          const fired = Number(
            (await db.query<{ n: string }>("SELECT count(*) AS n FROM palaver.cron_fired")).rows[0]?.n,
          );
          const ticks = tg.sent.filter((m) => String(m.chatId) === "999").length;
          expect(fired).toBeGreaterThan(0);
          expect(ticks).toBe(fired);

          // The turns the killed instance was running were taken up again within the turn timeout
          // + 10 s of the kill (the bound for a conversation held up by a dead instance).
          const retried = await db.query<{ s: number | null }>(
            "SELECT max(extract(epoch FROM started_at - $1)) AS s FROM palaver.inbound WHERE starts > 1",
            [killedAt],
          );
          expect(Number(retried.rows[0]?.s ?? 0)).toBeLessThanOrEqual(TURN_TIMEOUT_S + 10);
          // Every instance did work (the killed one before it died).
          const workers = await db.query<{ n: string }>(
            "SELECT count(DISTINCT sent_by) AS n FROM palaver.outbox",
          );
          expect(Number(workers.rows[0]?.n)).toBeGreaterThanOrEqual(3);
        } finally {
          await db.end();
        }
      },
      20 * 60_000,
    );
  }
});
