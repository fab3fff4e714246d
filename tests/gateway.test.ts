import { mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { systemMessage } from "../src/bus/types.js";
import { ConfigSchema } from "../src/config/schema.js";
import { diskThatFills } from "./helpers/full-disk.js";
import { Gateway } from "../src/gateway.js";
import { createProvider } from "../src/llm/openai-provider.js";
import { FakeOpenAI, lastUserText } from "./fakes/openai-server.js";
import { TestChannel } from "./helpers/test-channel.js";
import { startCli } from "./helpers/cli.js";
import { waitFor } from "./helpers/wait.js";

let dir: string;
let fake: FakeOpenAI;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), "palaver-gateway-"));
  fake = await FakeOpenAI.start();
});
afterEach(async () => {
  await fake.close();
  await rm(dir, { recursive: true, force: true });
});

function configFor(extra: Record<string, unknown> = {}) {
  return ConfigSchema.parse({
    agents: { defaults: { workspace: join(dir, "ws"), provider: "custom", model: "fake-model" } },
    providers: { custom: { apiKey: "k", apiBase: fake.baseURL } },
    channels: { telegram: { enabled: true, allowFrom: ["42"] } },
    gateway: { heartbeat: { enabled: false }, port: 0 },
    ...extra,
  });
}

describe("Gateway (in process, a loopback channel in place of Telegram)", () => {
  it("answers through the channel and, stopped during a slow turn, finishes it before exiting", async () => {
    const config = configFor();
    const channel = new TestChannel("telegram");
    const gateway = new Gateway({
      loaded: { config, workspace: join(dir, "ws"), path: join(dir, "config.json") },
      provider: createProvider(config),
      platforms: { telegram: async () => channel },
    });
    await gateway.start();
    try {
      fake.setHandler((req) => ({ content: `re: ${lastUserText(req)}`, delayMs: 400 }));
      channel.receive({ content: "hello", senderId: "42" });
      channel.receive({ content: "let me in", senderId: "7" });
      await waitFor(() => fake.requests.length === 1);

      await gateway.stop(5000); // SIGTERM while the turn waits on the LLM
      expect(channel.sent.map((m) => m.content)).toEqual([
        expect.stringMatching(/Your telegram user id is 7/),
        "re: hello",
      ]);
      expect(channel.stopped).toBe(true);
      const session = await readFile(join(dir, "ws", "sessions", "telegram_chat-1.jsonl"), "utf8");
      expect(session).toContain('"content":"re: hello"');
    } finally {
      await gateway.stop(100);
    }
  });
});

describe("Gateway start: each channel as soon as its SDK has loaded", () => {
  /** Telegram's SDK loads at once; Slack's only when the test calls slackLoaded. */
  function startWithSlowSlack() {
    const config = configFor({
      channels: {
        telegram: { enabled: true, allowFrom: ["42"] },
        slack: { enabled: true, allowFrom: ["*"] },
      },
    });
    const telegram = new TestChannel("telegram");
    const slack = new TestChannel("slack");
    let slackLoaded!: () => void;
    const slackSdk = new Promise<void>((resolve) => (slackLoaded = resolve));
    const gateway = new Gateway({
      loaded: { config, workspace: join(dir, "ws"), path: join(dir, "config.json") },
      provider: createProvider(config),
      platforms: { telegram: async () => telegram, slack: () => slackSdk.then(() => slack) },
    });
    return { gateway, telegram, slack, slackLoaded, starting: gateway.start() };
  }

  it("answers on a channel whose SDK is in while another platform's still loads; that one starts once loaded", async () => {
    fake.setHandler((req) => ({ content: `re: ${lastUserText(req)}` }));
    const { gateway, telegram, slack, slackLoaded, starting } = startWithSlowSlack();
    try {
      await waitFor(() => telegram.startAttempts === 1, 10_000, "telegram started");
      telegram.receive({ content: "hello", senderId: "42" });
      await waitFor(() => telegram.sent.length === 1, 10_000, "the reply");
      expect(telegram.sent[0]!.content).toBe("re: hello");
      expect(slack.startAttempts).toBe(0);

      slackLoaded();
      await starting;
      expect(slack.startAttempts).toBe(1);
      expect(gateway.channels.status().map((c) => [c.name, c.state])).toEqual([
        ["telegram", "running"],
        ["slack", "running"],
      ]);
    } finally {
      slackLoaded();
      await gateway.stop(500);
    }
  });

  it("stopped while an SDK still loads: start returns, and that channel never connects", async () => {
    const { gateway, telegram, slack, slackLoaded, starting } = startWithSlowSlack();
    await waitFor(() => telegram.startAttempts === 1, 10_000, "telegram started");
    const stopping = gateway.stop(500);
    slackLoaded();
    await starting;
    await stopping;
    expect(slack.startAttempts).toBe(0);
    expect(telegram.stopped).toBe(true);
  });
});

describe("Gateway restarts (journal)", () => {
  function gatewayWith(channel: TestChannel) {
    const config = configFor();
    return new Gateway({
      loaded: { config, workspace: join(dir, "ws"), path: join(dir, "config.json") },
      provider: createProvider(config),
      platforms: { telegram: async () => channel },
    });
  }

  it("answers exactly once a message whose turn was cut off, and ignores its redelivery", async () => {
    fake.setHandler((req) => ({ content: `re: ${lastUserText(req)}`, delayMs: 3000 }));
    const before = new TestChannel("telegram");
    const first = gatewayWith(before);
    await first.start();
    before.receive({ content: "hello", senderId: "42", messageId: "99" });
    await waitFor(() => fake.requests.length === 1);
    await first.stop(0); // the turn is aborted: no reply, not done
    expect(before.sent).toEqual([]);

    fake.setHandler((req) => ({ content: `re: ${lastUserText(req)}` }));
    const after = new TestChannel("telegram");
    const second = gatewayWith(after);
    await second.start();
    try {
      await waitFor(() => after.sent.length === 1);
      after.receive({ content: "hello", senderId: "42", messageId: "99" }); // the platform redelivers
      await second.agent.loop.idle();
      await second.channels.flush(1000);
      expect(after.sent.map((m) => m.content)).toEqual(["re: hello"]);
      expect(fake.requests.filter((r) => lastUserText(r) === "hello")).toHaveLength(2); // 1 cut off + 1 answered
    } finally {
      await second.stop(1000);
    }
  });

  it("answers after a restart a message whose download was cut off, exactly once", async () => {
    fake.setHandler((req) => ({ content: `re: ${lastUserText(req).split("\n")[0]}` }));
    const before = new TestChannel("telegram");
    const first = gatewayWith(before);
    await first.start();
    before.receiveLater({ content: "what is this photo?", senderId: "42", messageId: "7" });
    await first.stop(0); // killed while the photo downloads: it is never published
    expect(fake.requests).toHaveLength(0);

    const after = new TestChannel("telegram");
    const second = gatewayWith(after);
    await second.start();
    try {
      await waitFor(() => after.sent.length === 1);
      expect(after.sent[0]!.content).toBe("re: what is this photo?");
      expect(lastUserText(fake.requests[0]!)).toMatch(/being downloaded when palaver restarted/);
      after.receive({ content: "what is this photo?", senderId: "42", messageId: "7" }); // redelivered
      await second.agent.loop.idle();
      expect(fake.requests).toHaveLength(1);
    } finally {
      await second.stop(1000);
    }
  });

  it("delivers after a restart a reply the platform refused before", async () => {
    fake.setHandler((req) => ({ content: `re: ${lastUserText(req)}` }));
    const down = new TestChannel("telegram", { failSends: Infinity });
    const first = gatewayWith(down);
    await first.start();
    down.receive({ content: "ping", senderId: "42", messageId: "1" });
    await waitFor(() => down.sendAttempts >= 1);
    await first.stop(100);
    expect(down.sent).toEqual([]);

    const up = new TestChannel("telegram");
    const second = gatewayWith(up);
    await second.start();
    try {
      await waitFor(() => up.sent.length === 1);
      await second.channels.flush(1000);
      expect(up.sent.map((m) => m.content)).toEqual(["re: ping"]);
      expect(fake.requests).toHaveLength(1); // the turn is not run again
    } finally {
      await second.stop(1000);
    }
  });
});

describe("Gateway on a full disk", () => {
  async function readyz(gateway: Gateway): Promise<{ status: number; body: Record<string, unknown> }> {
    const res = await fetch(`http://127.0.0.1:${gateway.health.port}/readyz`);
    return { status: res.status, body: (await res.json()) as Record<string, unknown> };
  }

  it("keeps answering, reports the disk on /readyz, and after recovery and a restart answers nothing twice", async () => {
    fake.setHandler((req) => ({ content: `re: ${lastUserText(req)}` }));
    const config = configFor({ gateway: { heartbeat: { enabled: false }, port: 0, host: "127.0.0.1" } });
    const loaded = { config, workspace: join(dir, "ws"), path: join(dir, "config.json") };
    const { io, full } = diskThatFills();
    const channel = new TestChannel("telegram");
    const gateway = new Gateway({
      loaded,
      provider: createProvider(config),
      platforms: { telegram: async () => channel },
      journalIo: io,
    });
    await gateway.start();
    try {
      await waitFor(async () => (await readyz(gateway)).status === 200, 10_000, "ready");
      full.on = true;
      // Before: the ENOSPC was thrown out of the channel's handler (an unhandled rejection ended the daemon).
      channel.receive({ content: "hello", senderId: "42", messageId: "1" });
      await waitFor(() => channel.sent.length === 1);
      expect(channel.sent[0]!.content).toBe("re: hello");
      const down = await readyz(gateway);
      expect(down.status).toBe(503);
      expect(down.body.components).toMatchObject({
        journal: { ready: false, error: "disk full (ENOSPC)" },
      });

      full.on = false;
      await waitFor(async () => (await readyz(gateway)).status === 200, 15_000, "the journal to recover");
    } finally {
      await gateway.stop(1000);
    }

    // A restart over the same state: nothing to replay, and the platform's redelivery is not answered again.
    const after = new TestChannel("telegram");
    const second = new Gateway({
      loaded,
      provider: createProvider(config),
      platforms: { telegram: async () => after },
    });
    await second.start();
    try {
      after.receive({ content: "hello", senderId: "42", messageId: "1" });
      after.receive({ content: "marker", senderId: "42", messageId: "2" });
      await waitFor(() => after.sent.length === 1);
      await second.agent.loop.idle();
      await second.channels.flush(1000);
      expect(after.sent.map((m) => m.content)).toEqual(["re: marker"]);
      expect(fake.requests.filter((r) => lastUserText(r) === "hello")).toHaveLength(1);
    } finally {
      await second.stop(1000);
    }
  });
});

describe("Gateway.reload (SIGHUP)", () => {
  it("restarts only the channels whose config section changed", async () => {
    const made: TestChannel[] = [];
    const factory = (name: string) => async () => {
      const channel = new TestChannel(name);
      made.push(channel);
      return channel;
    };
    const config = configFor({
      channels: {
        telegram: { enabled: true, allowFrom: ["42"] },
        slack: { enabled: true, allowFrom: ["*"] },
      },
    });
    const gateway = new Gateway({
      loaded: { config, workspace: join(dir, "ws"), path: join(dir, "config.json") },
      provider: createProvider(config),
      platforms: { telegram: factory("telegram"), slack: factory("slack") },
    });
    await gateway.start();
    try {
      const [telegram, slack] = made;
      const next = configFor({
        channels: {
          telegram: { enabled: true, allowFrom: ["42", "43"] },
          slack: { enabled: true, allowFrom: ["*"] },
        },
      });
      await gateway.reload({ config: next });

      expect(made).toHaveLength(3);
      expect(telegram!.stopped).toBe(true);
      expect(slack!.stopped).toBe(false);
      expect(slack!.startAttempts).toBe(1);
      const newTelegram = made[2]!;
      fake.setHandler(() => ({ content: "welcome" }));
      newTelegram.receive({ content: "hi", senderId: "43" }); // newly allowed
      await waitFor(() => newTelegram.sent.length === 1);
      expect(newTelegram.sent[0]!.content).toBe("welcome");
    } finally {
      await gateway.stop(500);
    }
  });
});

describe("Gateway.reload enabling a channel again", () => {
  it("sends the replies the journal kept for it while it was off", async () => {
    await mkdir(join(dir, "journal"), { recursive: true });
    const kept = { channel: "slack", chatId: "C1", content: "kept for slack" };
    await writeFile(
      join(dir, "journal", "messages.jsonl"),
      `${JSON.stringify({ t: "out", id: "o1", at: 1, msg: kept })}\n`,
    );
    const slack = new TestChannel("slack");
    const config = configFor();
    const gateway = new Gateway({
      loaded: { config, workspace: join(dir, "ws"), path: join(dir, "config.json") },
      provider: createProvider(config),
      platforms: { telegram: async () => new TestChannel("telegram"), slack: async () => slack },
    });
    await gateway.start();
    try {
      expect(gateway.journal.pending.outbound).toBe(1); // kept, not dropped
      await gateway.reload({
        config: configFor({
          channels: {
            telegram: { enabled: true, allowFrom: ["42"] },
            slack: { enabled: true, allowFrom: ["*"] },
          },
        }),
      });
      await waitFor(() => slack.sent.length === 1, 10_000, "the kept reply");
      expect(slack.sent[0]!.content).toBe("kept for slack");
      await waitFor(() => gateway.journal.pending.outbound === 0, 10_000, "the reply marked sent");
    } finally {
      await gateway.stop(500);
    }
  });
});

describe("Gateway: replies to a channel that is not running", () => {
  it("keeps a reminder for a channel retrying its start and delivers it once it runs; /metrics counts it then", async () => {
    fake.setHandler(() => ({ content: "Time to stretch!" }));
    // Down at first (a bad token being fixed, the platform unreachable): the reply must not vanish.
    const telegram = new TestChannel("telegram", { failStarts: 1 });
    const config = configFor();
    const gateway = new Gateway({
      loaded: { config, workspace: join(dir, "ws"), path: join(dir, "config.json") },
      provider: createProvider(config),
      platforms: { telegram: async () => telegram },
      channelRetryBaseMs: 60_000,
    });
    await gateway.start();
    const delivered = async () =>
      /palaver_messages_out_total\{channel="telegram",kind="final"\} 1/.test(await gateway.metrics.text());
    try {
      expect(gateway.channels.status()[0]!.state).toBe("retrying");
      gateway.bus.publishInbound(
        systemMessage({
          senderId: "cron",
          content: "remind: stretch",
          origin: { channel: "telegram", chatId: "42" },
        }),
      );
      await gateway.agent.loop.idle();
      await waitFor(() => gateway.channels.heldFor("telegram") === 1, 10_000, "the reply held");
      expect(telegram.sent).toEqual([]);
      expect(gateway.journal.pending.outbound).toBe(1);
      expect(await delivered()).toBe(false);

      // A reload restarts it (as SIGHUP after fixing the token would): the kept reply goes out.
      await gateway.reload({
        config: configFor({ channels: { telegram: { enabled: true, allowFrom: ["*"] } } }),
      });
      await waitFor(() => telegram.sent.length === 1, 10_000, "the kept reply");
      expect(telegram.sent[0]!.content).toBe("Time to stretch!");
      await waitFor(() => gateway.journal.pending.outbound === 0, 10_000, "the reply marked sent");
      await waitFor(delivered, 10_000, "the delivery counted");
    } finally {
      await gateway.stop(500);
    }
  });
});

describe("palaver gateway (child process)", () => {
  it("finishes the turn in flight on SIGTERM, persists it and exits 0", { timeout: 90_000 }, async () => {
    // A daily reminder that was due while the daemon was down runs at startup: a turn with no chat
    // platform needed. (Recurring: a one-shot job's session goes once its turn ends.)
    const configPath = join(dir, "config.json");
    await writeFile(
      configPath,
      JSON.stringify({
        agents: { defaults: { workspace: join(dir, "ws"), provider: "custom", model: "fake-model" } },
        providers: { custom: { apiKey: "k", apiBase: fake.baseURL } },
        gateway: { heartbeat: { enabled: false }, port: 0 },
      }),
    );
    const due = Date.now() - 60_000;
    await mkdir(join(dir, "cron"), { recursive: true });
    await writeFile(
      join(dir, "cron", "jobs.json"),
      JSON.stringify({
        version: 1,
        jobs: [
          {
            id: "job00001",
            name: "stretch",
            enabled: true,
            schedule: { kind: "every", everyMs: 24 * 3600_000 },
            payload: {
              kind: "agent_turn",
              message: "Remind me to stretch",
              deliver: true,
              channel: "telegram",
              to: "1",
            },
            state: { nextRunAtMs: due },
            createdAtMs: due - 1000,
            updatedAtMs: due - 1000,
            deleteAfterRun: false,
          },
        ],
      }),
    );
    fake.setHandler(() => ({ content: "Time to stretch!", delayMs: 1000 }));

    const run = startCli(["gateway", "--config", configPath], {
      cwd: dir,
      env: { HOME: dir },
      timeoutMs: 60_000,
    });
    await waitFor(() => fake.requests.length === 1, 30_000, "the reminder's LLM request");
    run.child.kill("SIGTERM");
    expect(await run.exited).toBe(0);
    const session = await readFile(join(dir, "ws", "sessions", "cron_job00001.jsonl"), "utf8");
    expect(session).toContain("Time to stretch!");
    expect(run.stderr).toMatch(/stopped/);
  });
});
