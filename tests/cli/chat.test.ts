import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { FakeOpenAI } from "../fakes/openai-server.js";
import { pino } from "pino";
import { cronStorePath } from "../../src/config/paths.js";
import { buildSchedule } from "../../src/cron/schedule.js";
import { CronService } from "../../src/cron/service.js";
import { lastUserText } from "../fakes/openai-server.js";
import { runCli, startCli } from "../helpers/cli.js";
import { waitFor } from "../helpers/wait.js";

describe("palaver chat -m (child process)", () => {
  let dir: string;
  let fake: FakeOpenAI;
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), "palaver-cli-"));
    fake = await FakeOpenAI.start();
  });
  afterEach(async () => {
    await fake.close();
    await rm(dir, { recursive: true, force: true });
  });

  it("prints the reply, persists the session and exits 0", async () => {
    const workspace = join(dir, "ws");
    const configPath = join(dir, "config.json");
    await writeFile(
      configPath,
      JSON.stringify({
        agents: { defaults: { workspace, model: "fake-model", provider: "custom" } },
        providers: { custom: { apiBase: fake.baseURL } },
      }),
    );
    // The key comes from a .env beside the config, as the README tells newcomers.
    await writeFile(join(dir, ".env"), "PALAVER_PROVIDERS__CUSTOM__API_KEY=sk-from-dotenv-123456789\n");
    fake.enqueue({ content: "Hello from the **fake** model." });

    const result = await runCli(["chat", "-m", "hello", "--config", configPath], {
      cwd: dir,
      env: { HOME: dir },
    });

    expect(result.stderr).not.toMatch(/sk-from-dotenv/);
    expect(result.code).toBe(0);
    // Piped, the reply is printed exactly as the model wrote it.
    expect(result.stdout).toBe("Hello from the **fake** model.\n");
    expect(fake.requests[0]!.headers.authorization).toBe("Bearer sk-from-dotenv-123456789");
    const session = await readFile(join(workspace, "sessions", "cli_direct.jsonl"), "utf8");
    expect(session).toContain('"content":"hello"');
    expect(session).toContain("Hello from the **fake** model.");
  });
});

describe("palaver chat (interactive child process) and reminders set in the terminal", () => {
  let dir: string;
  let fake: FakeOpenAI;
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), "palaver-cli-cron-"));
    fake = await FakeOpenAI.start();
  });
  afterEach(async () => {
    await fake.close();
    await rm(dir, { recursive: true, force: true });
  });

  it("shows a reminder of its own chat that came due while it was closed", { timeout: 90_000 }, async () => {
    const configPath = join(dir, "config.json");
    await writeFile(
      configPath,
      JSON.stringify({
        agents: { defaults: { workspace: join(dir, "ws"), model: "fake-model", provider: "custom" } },
        providers: { custom: { apiKey: "k", apiBase: fake.baseURL } },
      }),
    );
    // Set earlier in this terminal chat (cron tool, creator the terminal's user) and due by now.
    const service = new CronService({
      storePath: cronStorePath(configPath),
      bus: { publishInbound: () => undefined },
      maxCatchUp: 5,
      log: pino({ level: "silent" }),
    });
    const { schedule } = buildSchedule({ everySeconds: 3600 }, Date.now());
    const job = await service.add({
      message: "stretch",
      schedule,
      channel: "cli",
      to: "direct",
      creator: { kind: "sender", channel: "cli", senderId: "user" },
    });
    await service.requestRun(job.id);
    fake.setHandler((req) => ({
      content: lastUserText(req).includes("stretch") ? "Time to stretch!" : "ok",
    }));

    const chat = startCli(["chat", "--config", configPath], { cwd: dir, env: { HOME: dir } });
    await waitFor(() => chat.stdout.includes("Time to stretch!"), 60_000, "the reminder printed");
    // End of input leaves (with a pipe, readline's "exit" alone does not end the process).
    chat.child.stdin.end("exit\n");
    expect(await chat.exited).toBe(0);
    // Run here: not refused for allowFrom (the terminal has none), not left for a gateway.
    const [stored] = await service.list();
    expect(stored!.state.lastStatus).toBe("ok");
  });
});

describe("palaver without an LLM provider", () => {
  it("says in plain words which key to set and exits 78, without a stack trace", async () => {
    const dir = await mkdtemp(join(tmpdir(), "palaver-nokey-"));
    try {
      const result = await runCli(["chat", "-m", "hi"], { cwd: dir, env: { HOME: dir } });
      expect(result.code).toBe(78);
      expect(result.stderr).toMatch(
        /^palaver: No LLM provider is configured.*PALAVER_PROVIDERS__OPENAI__API_KEY/,
      );
      expect(result.stderr).not.toMatch(/\n\s+at /);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
