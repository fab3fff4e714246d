import { copyFile, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pino } from "pino";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { MessageBus } from "../../src/bus/bus.js";
import type { InboundMessage, Origin } from "../../src/bus/types.js";
import { ConfigSchema } from "../../src/config/schema.js";
import {
  HeartbeatService,
  actionableContent,
  heartbeatMessage,
  isNothingToDo,
  type HeartbeatOptions,
} from "../../src/heartbeat/heartbeat.js";
import { FakeOpenAI, lastUserText, toolCall } from "../fakes/openai-server.js";
import { startHarness } from "../helpers/agent-harness.js";
import { createGate } from "../helpers/gate.js";
import { waitFor } from "../helpers/wait.js";
import { fakeProvider } from "../helpers/fake-provider.js";

const TEMPLATE = join(import.meta.dirname, "../../workspace/HEARTBEAT.md");
const TASKS = `# Heartbeat Tasks

<!-- a comment with - [ ] an example task that is not a task -->

## Active Tasks

- [ ] Every morning after 8:00, check https://example.com/status
- [x] Water the plants (done)

## Completed
`;

const chat: Origin = {
  channel: "telegram",
  chatId: "42",
  sessionKey: "telegram:42",
  metadata: { messageId: 7 },
};

let fake: FakeOpenAI;
let workspace: string;
let bus: MessageBus;
let inbound: InboundMessage[];
let services: HeartbeatService[];

beforeEach(async () => {
  fake = await FakeOpenAI.start();
  workspace = await mkdtemp(join(tmpdir(), "palaver-heartbeat-"));
  bus = new MessageBus();
  inbound = [];
  bus.onInbound((msg) => inbound.push(msg));
  services = [];
});

afterEach(async () => {
  for (const s of services) s.stop();
  await Promise.all(services.map((s) => s.idle()));
  vi.useRealTimers();
  await fake.close();
  await rm(workspace, { recursive: true, force: true });
});

function service(overrides: Partial<HeartbeatOptions> = {}): HeartbeatService {
  const s = new HeartbeatService({
    workspace,
    provider: fakeProvider(fake),
    bus,
    intervalSeconds: 60,
    enabled: true,
    lastActiveChat: () => chat,
    log: pino({ level: "silent" }),
    now: () => new Date(2026, 10, 22, 9, 30),
    ...overrides,
  });
  services.push(s);
  return s;
}

const decide = (args: Record<string, unknown>) => ({ toolCalls: [toolCall("heartbeat", args)] });

describe("HeartbeatService.tick", () => {
  it("does nothing without HEARTBEAT.md", async () => {
    expect(await service().tick()).toBe("no-file");
    expect(fake.requests).toHaveLength(0);
    expect(inbound).toEqual([]);
  });

  it("does not call the LLM for the onboarding template (no tasks)", async () => {
    await copyFile(TEMPLATE, join(workspace, "HEARTBEAT.md"));
    expect(await service().tick()).toBe("no-tasks");
    expect(fake.requests).toHaveLength(0);
    expect(inbound).toEqual([]);
  });

  it("the onboarding template names the config key that sets the interval (issue 13)", async () => {
    const template = await readFile(TEMPLATE, "utf8");
    const key = /`gateway\.heartbeat\.(\w+)`/.exec(template)?.[1];
    expect(key).toBe("intervalSeconds");
    const config = ConfigSchema.parse({ gateway: { heartbeat: { [key!]: 120 } } });
    expect(config.gateway.heartbeat.intervalSeconds).toBe(120);
  });

  it("asks the LLM with its private tool and publishes nothing when it says skip", async () => {
    await writeFile(join(workspace, "HEARTBEAT.md"), TASKS);
    fake.enqueue(decide({ action: "skip" }));
    expect(await service().tick()).toBe("skip");
    expect(inbound).toEqual([]);

    const body = fake.requests[0]!.body;
    expect(body.tools!.map((t) => t.function.name)).toEqual(["heartbeat"]);
    expect(body.messages[0]!.role).toBe("system");
    expect(body.messages[0]!.content).toMatch(/heartbeat agent/);
    const user = lastUserText(fake.requests[0]!);
    expect(user).toContain("Current time: 2026-11-22 09:30 (Sunday)");
    expect(user).toContain("check https://example.com/status");
    // Comments and completed items are not sent as tasks.
    expect(user).not.toContain("an example task");
    expect(user).not.toContain("Water the plants");
  });

  it("sends at most promptFileMaxChars of a huge HEARTBEAT.md, with a notice (issue 11)", async () => {
    const task = "- [ ] Check the mailbox of the shared account and report\n";
    const huge = `# Tasks\n\n${task.repeat(200_000)}`; // about 11 MB
    await writeFile(join(workspace, "HEARTBEAT.md"), huge);
    fake.enqueue(decide({ action: "skip" }));
    expect(await service({ promptFileMaxChars: 2000 }).tick()).toBe("skip");
    const user = lastUserText(fake.requests[0]!);
    expect(user).toContain("Check the mailbox");
    expect(user).toMatch(
      /\[truncated: 2000 characters of \d+ bytes shown; the full file is at HEARTBEAT\.md/,
    );
    expect(user.length).toBeLessThan(2000 + 1000);
  });

  it("treats a reply without a tool call as skip", async () => {
    await writeFile(join(workspace, "HEARTBEAT.md"), TASKS);
    fake.enqueue({ content: "Nothing is due, I think." });
    expect(await service().tick()).toBe("skip");
    expect(inbound).toEqual([]);
  });

  it("publishes the due tasks as a system message for the last active chat in the heartbeat session", async () => {
    await writeFile(join(workspace, "HEARTBEAT.md"), TASKS);
    fake.enqueue(decide({ action: "run", tasks: "Check https://example.com/status" }));
    expect(await service().tick()).toBe("run");

    expect(inbound).toHaveLength(1);
    const msg = inbound[0]!;
    expect(msg.channel).toBe("system");
    expect(msg.senderId).toBe("heartbeat");
    expect(msg.chatId).toBe("telegram:42");
    expect(msg.sessionKey).toBe("heartbeat");
    expect(msg.metadata?.origin).toEqual(chat);
    expect(msg.content).toBe(heartbeatMessage("Check https://example.com/status"));
    expect(msg.content).toMatch(/^\[Heartbeat\] These periodic tasks are due now:\nCheck https/);
    expect(msg.content).toContain("reply with exactly HEARTBEAT_OK");
  });

  it("falls back to the file's tasks when the LLM says run without naming them", async () => {
    await writeFile(join(workspace, "HEARTBEAT.md"), TASKS);
    fake.enqueue(decide({ action: "run" }));
    expect(await service().tick()).toBe("run");
    expect(inbound[0]!.content).toContain("- [ ] Every morning after 8:00, check https://example.com/status");
  });

  it("publishes nothing (and asks nothing) when no chat has been active", async () => {
    await writeFile(join(workspace, "HEARTBEAT.md"), TASKS);
    const lines: Record<string, unknown>[] = [];
    const log = pino(
      { level: "info" },
      { write: (line: string) => void lines.push(JSON.parse(line) as Record<string, unknown>) },
    );
    fake.enqueue(decide({ action: "run", tasks: "x" }));
    expect(await service({ lastActiveChat: () => undefined, log }).tick()).toBe("no-chat");
    expect(inbound).toEqual([]);
    expect(fake.requests).toHaveLength(0);
    expect(lines.some((l) => /no chat has been active/.test(String(l.msg)))).toBe(true);
  });

  it("is disabled when configured so", async () => {
    await writeFile(join(workspace, "HEARTBEAT.md"), TASKS);
    expect(await service({ enabled: false }).tick()).toBe("disabled");
    expect(fake.requests).toHaveLength(0);
  });

  it("rejects when the LLM fails (the timer logs it)", async () => {
    await writeFile(join(workspace, "HEARTBEAT.md"), TASKS);
    fake.enqueue({ status: 500 });
    await expect(service().tick()).rejects.toThrow(/heartbeat decision failed/);
    expect(inbound).toEqual([]);
  });
});

describe("HeartbeatService timer", () => {
  // Only the interval is faked: the HTTP client and the fake server keep real timers.
  beforeEach(() => {
    vi.useFakeTimers({ toFake: ["setInterval", "clearInterval"] });
  });

  it("an interval longer than a Node timer holds never turns into a 1 ms loop (issue 11)", async () => {
    // The schema refuses such a value; this is the service's own guard for one that got past it.
    await writeFile(join(workspace, "HEARTBEAT.md"), TASKS);
    fake.setHandler(() => decide({ action: "skip" }));
    const s = service({ intervalSeconds: 3_000_000 });
    s.start();
    // The fake clock behaves like Node: a delay above 2^31-1 ms fires after 1 ms.
    vi.advanceTimersByTime(10_000);
    await s.idle();
    expect(fake.requests).toHaveLength(0);
  });

  it("checks once per interval until stop() clears it", async () => {
    await writeFile(join(workspace, "HEARTBEAT.md"), TASKS);
    fake.setHandler(() => decide({ action: "skip" }));
    const s = service({ intervalSeconds: 60 });
    s.start();
    s.start(); // a second start does not arm a second interval

    vi.advanceTimersByTime(59_000);
    await s.idle();
    expect(fake.requests).toHaveLength(0);
    vi.advanceTimersByTime(1_000);
    await waitFor(() => fake.requests.length === 1);
    await s.idle();
    vi.advanceTimersByTime(60_000);
    await waitFor(() => fake.requests.length === 2);
    await s.idle();

    s.stop();
    vi.advanceTimersByTime(600_000);
    // A tick the interval fired would be in flight now (tick() marks it at once): idle() waits for it.
    await s.idle();
    expect(fake.requests).toHaveLength(2);
  });

  it("never overlaps ticks: a tick while one runs is skipped", async () => {
    await writeFile(join(workspace, "HEARTBEAT.md"), TASKS);
    // The LLM is held until both later ticks fired: they certainly came while the check ran.
    const gate = createGate();
    fake.setHandler(async () => {
      await gate.opened;
      return decide({ action: "run", tasks: "check" });
    });
    const s = service({ intervalSeconds: 60 });
    s.start();
    vi.advanceTimersByTime(60_000);
    await waitFor(() => fake.requests.length === 1);
    vi.advanceTimersByTime(60_000); // fires while the first check waits for the LLM
    vi.advanceTimersByTime(60_000);
    gate.open();
    await waitFor(() => inbound.length === 1);
    await s.idle();
    // The next tick after the check proves the two skipped ones started nothing: its request is the second.
    vi.advanceTimersByTime(60_000);
    await waitFor(() => inbound.length === 2);
    await s.idle();
    expect(fake.requests).toHaveLength(2);
    expect(inbound).toHaveLength(2);
  });

  it("stop() aborts a check in progress and nothing is published", async () => {
    await writeFile(join(workspace, "HEARTBEAT.md"), TASKS);
    // Far beyond the test's limit: idle() can only resolve because stop() aborted the check.
    fake.setHandler(() => ({ ...decide({ action: "run", tasks: "check" }), delayMs: 600_000 }));
    const s = service();
    s.start();
    vi.advanceTimersByTime(60_000);
    await waitFor(() => fake.requests.length === 1);
    s.stop();
    await s.idle();
    expect(inbound).toEqual([]);
  });

  it("does not arm a timer when disabled", async () => {
    await writeFile(join(workspace, "HEARTBEAT.md"), TASKS);
    const s = service({ enabled: false });
    s.start();
    expect(vi.getTimerCount()).toBe(0);
    vi.advanceTimersByTime(600_000);
    await s.idle();
    expect(fake.requests).toHaveLength(0);
  });
});

describe("heartbeat through the agent loop", () => {
  it("does the due tasks in the heartbeat session and reports to the chat the user last wrote in", async () => {
    const h = await startHarness();
    const s = new HeartbeatService({
      workspace: h.workspace,
      provider: h.provider,
      bus: h.bus,
      intervalSeconds: 60,
      enabled: true,
      lastActiveChat: () => h.loop.lastActiveChat,
      log: pino({ level: "silent" }),
    });
    try {
      h.fake!.setHandler((req) => {
        if (req.body.tools?.some((t) => t.function.name === "heartbeat")) {
          return decide({ action: "run", tasks: "Check the status page" });
        }
        if (lastUserText(req).startsWith("[Heartbeat]")) return { content: "The status page is down." };
        return { content: "hello" };
      });
      await writeFile(join(h.workspace, "HEARTBEAT.md"), TASKS);
      expect(await s.tick()).toBe("no-chat");

      expect((await h.ask("c1", "hi")).content).toBe("hello");
      expect(await s.tick()).toBe("run");
      await waitFor(() => h.outbound.filter((o) => (o.kind ?? "final") === "final").length === 2);
      await h.loop.idle();
      expect(h.outbound.at(-1)).toMatchObject({
        channel: "test",
        chatId: "c1",
        content: "The status page is down.",
      });
      const heartbeat = await h.sessions.get("heartbeat");
      expect(heartbeat.messages.map((x) => x.content)).toEqual([
        heartbeatMessage("Check the status page"),
        "The status page is down.",
      ]);
      // The user's own conversation is not touched.
      expect((await h.sessions.get("test:c1")).messages).toHaveLength(2);
    } finally {
      s.stop();
      await h.cleanup();
    }
  });
});

describe("actionableContent", () => {
  it("is empty for headings, comments, blank lines and empty or completed checkboxes", () => {
    expect(actionableContent("")).toBe("");
    expect(
      actionableContent(
        "# Tasks\n\n<!-- note\n- [ ] example\n-->\n## Active\n- [ ]\n* [ ] \n- [x] done\n---\n",
      ),
    ).toBe("");
    expect(actionableContent("# Tasks\n<!-- unclosed comment\n- [ ] example")).toBe("");
  });

  it("keeps open tasks and plain text", () => {
    expect(actionableContent("# T\n- [ ] call mum\n- [x] done\nRemind me to stretch")).toBe(
      "- [ ] call mum\nRemind me to stretch",
    );
  });
});

describe("isNothingToDo", () => {
  it.each([
    "HEARTBEAT_OK",
    "  HEARTBEAT_OK\n",
    "**HEARTBEAT_OK**",
    "`HEARTBEAT_OK`",
    "HEARTBEAT_OK.",
    "heartbeat_ok",
    "> HEARTBEAT_OK!",
    "",
    "   ",
  ])("is true for %j", (reply) => {
    expect(isNothingToDo(reply)).toBe(true);
  });

  it.each([
    "The site is down (status 503).",
    "HEARTBEAT_OK but the site is down",
    "Site is down! Not HEARTBEAT_OK",
    "OK",
  ])("is false for %j", (reply) => {
    expect(isNothingToDo(reply)).toBe(false);
  });
});
