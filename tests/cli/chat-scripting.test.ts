/**
 * What scripts rely on from `palaver chat`, through the real CLI as a child process:
 * exit codes, a --config path that does not exist, piped stdin, nanobot-style
 * session keys and MCP tools being there for `chat -m`.
 */
import { mkdtemp, readdir, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { stdioServerCommand } from "../fakes/mcp-stdio.js";
import { FakeOpenAI, lastUserText } from "../fakes/openai-server.js";
import { runCli, startCli } from "../helpers/cli.js";

describe("palaver chat for scripts (child process)", () => {
  let dir: string;
  let fake: FakeOpenAI;
  let configPath: string;
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), "palaver-chat-script-"));
    fake = await FakeOpenAI.start();
    configPath = join(dir, "config.json");
    await writeConfig({});
  });
  afterEach(async () => {
    await fake.close();
    await rm(dir, { recursive: true, force: true });
  });

  async function writeConfig(extra: Record<string, unknown>): Promise<void> {
    await writeFile(
      configPath,
      JSON.stringify({
        agents: { defaults: { workspace: join(dir, "ws"), model: "fake-model", provider: "custom" } },
        providers: { custom: { apiKey: "k", apiBase: fake.baseURL } },
        ...extra,
      }),
    );
  }

  const chat = (args: string[], stdin?: string) =>
    runCli(["chat", "--config", configPath, ...args], { cwd: dir, env: { HOME: dir }, stdin });

  it("chat -m exits 1 and says why on stderr when the LLM call fails", async () => {
    // 401: not retried, so the failure comes at once.
    fake.enqueue({ status: 401 });
    const result = await chat(["-m", "hello"]);
    expect(result.code).toBe(1);
    expect(result.stdout).toBe("");
    expect(result.stderr).toMatch(/^palaver: .+/m);
    expect(result.stderr).not.toMatch(/\n\s+at /);
  });

  it("chat -m exits 0 for a real answer", async () => {
    fake.enqueue({ content: "fine" });
    const result = await chat(["-m", "hello"]);
    expect(result.code).toBe(0);
    expect(result.stdout).toBe("fine\n");
  });

  it("--config naming a file that does not exist is an error (78) naming the path", async () => {
    // Everything needed comes from the environment: on defaults the chat would work.
    const env = {
      HOME: dir,
      PALAVER_AGENTS__DEFAULTS__PROVIDER: "custom",
      PALAVER_AGENTS__DEFAULTS__MODEL: "fake-model",
      PALAVER_PROVIDERS__CUSTOM__API_KEY: "k",
      PALAVER_PROVIDERS__CUSTOM__API_BASE: fake.baseURL,
    };
    fake.enqueue({ content: "answered on defaults" });
    const missing = join(dir, "typo.json");
    const result = await runCli(["chat", "-m", "hi", "--config", missing], { cwd: dir, env });
    expect(result.code).toBe(78);
    expect(result.stderr).toMatch(new RegExp(`^palaver: config file ${missing} .*does not exist`));
    expect(fake.requests).toHaveLength(0);
  });

  it("answers piped stdin line by line, in order, prints every reply and exits after the last", async () => {
    fake.setHandler((req) => ({ content: `re: ${lastUserText(req)}` }));
    const result = await chat([], "one\ntwo\n\nthree\n");
    expect(result.code).toBe(0);
    // Only the replies: no banner, no prompts, no progress.
    expect(result.stdout).toBe("re: one\nre: two\nre: three\n");
    expect(fake.requests.map(lastUserText)).toEqual(["one", "two", "three"]);
  });

  it("piped chat prints a reply as written, as `chat -m` does: the same text from both", async () => {
    fake.setHandler(() => ({ content: "# Title\nSome **bold** text." }));
    const piped = await chat([], "hi\n");
    const once = await chat(["-m", "hi"]);
    expect(piped.stdout).toBe("# Title\nSome **bold** text.\n");
    expect(once.stdout).toBe(piped.stdout);
  });

  it("`exit` in piped input leaves after answering what came before, with stdin still open", async () => {
    fake.setHandler((req) => ({ content: `re: ${lastUserText(req)}` }));
    const child = startCli(["chat", "--config", configPath], { cwd: dir, env: { HOME: dir } });
    child.child.stdin.write("one\nexit\nnever sent\n");
    try {
      expect(await child.exited).toBe(0);
    } finally {
      child.child.stdin.destroy();
    }
    expect(child.stdout).toBe("re: one\n");
    expect(fake.requests.map(lastUserText)).toEqual(["one"]);
  });

  it("-s takes nanobot's session key: cli:direct continues cli_direct.jsonl", async () => {
    fake.setHandler((req) => ({ content: `re: ${lastUserText(req)}` }));
    expect((await chat(["-m", "first"])).code).toBe(0);
    const second = await chat(["-m", "second", "-s", "cli:direct"]);
    expect(second.code).toBe(0);
    expect(await readdir(join(dir, "ws", "sessions"))).toEqual(["cli_direct.jsonl"]);
    // The second turn saw the first: the same conversation.
    const sent = fake.requests[1]!.body.messages.map((m) => m.content);
    expect(sent).toContain("re: first");
  });

  it("chat -m waits for a slow-starting MCP server, so its tools are there for the first turn", async () => {
    await writeConfig({
      tools: {
        mcpServers: {
          slow: { ...stdioServerCommand(), env: { FAKE_MCP_START_DELAY_MS: "2000" } },
        },
      },
    });
    fake.enqueue({ content: "done" });
    const result = await chat(["-m", "echo hi"]);
    expect(result.code).toBe(0);
    const offered = fake.requests[0]!.body.tools?.map((t) => t.function.name) ?? [];
    expect(offered).toContain("mcp_slow_echo");
  });

  it("SIGTERM while chat -m waits for MCP servers stops at once, ends them and says so", async () => {
    await writeConfig({
      tools: {
        mcpServers: { stuck: { ...stdioServerCommand(), env: { FAKE_MCP_START_DELAY_MS: "600000" } } },
      },
    });
    // --verbose: the server's stderr line is logged, so the test sees it has started.
    const child = startCli(["chat", "-m", "hi", "--config", configPath, "--verbose"], {
      cwd: dir,
      env: { HOME: dir },
    });
    await child.stderrIncludes("fake server: started pid");
    const pid = Number(/fake server: started pid (\d+)/.exec(child.stderr)![1]);
    child.child.kill("SIGTERM");
    expect(await child.exited).toBe(143);
    expect(child.stderr).toContain("palaver: stopped by SIGTERM while waiting for MCP servers to start");
    expect(fake.requests).toHaveLength(0);
    // The server that was still starting did not outlive the chat.
    expect(() => process.kill(pid, 0)).toThrow();
  });

  it("an error is one clear line on stderr, the stack only with --verbose", async () => {
    // The workspace cannot be created: a file stands where its parent folder should be.
    await writeFile(join(dir, "file"), "");
    const args = ["-m", "hi", "--workspace", join(dir, "file", "ws")];
    const plain = await chat(args);
    expect(plain.code).toBe(1);
    expect(plain.stderr).toMatch(/^palaver: .*ENOTDIR.*\n$/);
    expect(plain.stderr.trim().split("\n")).toHaveLength(1);

    const verbose = await chat([...args, "--verbose"]);
    expect(verbose.code).toBe(1);
    expect(verbose.stderr).toMatch(/\n\s+at /);
  });
});
