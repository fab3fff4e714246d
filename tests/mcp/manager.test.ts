/**
 * McpManager against real MCP servers built with the SDK: the stdio script in
 * tests/fakes run as a child process, and Streamable HTTP / SSE servers on
 * loopback. Every test shuts its manager down and checks no process is left.
 */
import { existsSync, readFileSync } from "node:fs";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { ToolRegistry } from "../../src/agent/tools/registry.js";
import { McpManager, type McpManagerOptions } from "../../src/mcp/manager.js";
import { FakeMcpHttpServer } from "../fakes/mcp-http-server.js";
import { PNG_BASE64 } from "../fakes/mcp-tools.js";
import { stdioServerCommand } from "../fakes/mcp-stdio.js";
import { call, captureLogger, isAlive, mcpServers, waitFor } from "./helpers.js";

let dir: string;
const managers: McpManager[] = [];
const httpServers: FakeMcpHttpServer[] = [];

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), "palaver-mcp-"));
});
afterEach(async () => {
  await Promise.all(managers.splice(0).map((m) => m.shutdown()));
  await Promise.all(httpServers.splice(0).map((s) => s.close()));
  await rm(dir, { recursive: true, force: true });
});

function manager(
  servers: Record<string, Record<string, unknown>>,
  extra: Partial<McpManagerOptions> = {},
): { manager: McpManager; registry: ToolRegistry } {
  const registry = new ToolRegistry();
  const m = new McpManager({
    servers: mcpServers(servers),
    registry,
    env: {},
    // Generous: the fake stdio server starts through tsx, which takes seconds on a loaded machine.
    connectTimeoutMs: 60_000,
    ...extra,
  });
  managers.push(m);
  return { manager: m, registry };
}

async function http(mode: "streamable-http" | "sse", requireHeaders?: Record<string, string>) {
  const srv = await FakeMcpHttpServer.start({ mode, requireHeaders });
  httpServers.push(srv);
  return srv;
}

const stdio = (extra: Record<string, unknown> = {}) => ({ ...stdioServerCommand(), ...extra });

function report(m: McpManager, name: string) {
  const r = m.status().find((s) => s.name === name);
  if (!r) throw new Error(`no server ${name}`);
  return r;
}

async function pidOf(registry: ToolRegistry, server: string): Promise<number> {
  const pid = Number(await call(registry, `mcp_${server}_pid`));
  expect(pid).toBeGreaterThan(0);
  return pid;
}

describe("stdio servers", () => {
  it("lists the server's tools as mcp_<server>_<tool> with its JSON Schema, and calls them", async () => {
    const { manager: m, registry } = manager({ files: stdio() });
    await m.ensureReady(60_000);

    const r = report(m, "files");
    expect(r.state).toBe("connected");
    expect(r.transport).toBe("stdio");
    expect(r.tools).toEqual(expect.arrayContaining(["mcp_files_echo", "mcp_files_add", "mcp_files_toggle"]));
    expect(r.tools).toHaveLength(13);
    expect(registry.has("mcp_files_echo")).toBe(true);

    const echo = registry.definitions().find((d) => d.function.name === "mcp_files_echo")!;
    expect(echo.function.description).toBe("Echo the text back.");
    expect(echo.function.parameters).toMatchObject({
      type: "object",
      properties: { text: { type: "string", description: "what to echo" } },
      required: ["text"],
    });

    expect(await call(registry, "mcp_files_echo", { text: "hello" })).toBe("echo: hello");
    // Structured content repeated as text is shown once.
    expect(await call(registry, "mcp_files_add", { a: 2, b: 3 })).toBe('{"sum":5}');
  });

  it("turns isError results and JSON-RPC errors into Error text for the model", async () => {
    const { manager: m, registry } = manager({ s: stdio() });
    await m.ensureReady(60_000);
    expect(await call(registry, "mcp_s_fail")).toBe("Error: the thing broke");
    expect(await call(registry, "mcp_s_throw")).toBe("Error: mcp_s_throw failed: MCP error -32603: exploded");
    // The server is still fine afterwards.
    expect(await call(registry, "mcp_s_echo", { text: "still here" })).toBe("echo: still here");
  });

  it("expands ${VAR} in env from the given environment, and does not pass palaver's own environment on", async () => {
    const { log, lines } = captureLogger();
    const { manager: m, registry } = manager(
      { s: stdio({ env: { GREETING: "hello ${FAKE_NAME}", EMPTY: "[${NOT_SET_ANYWHERE}]" }, cwd: dir }) },
      { env: { FAKE_NAME: "bob" }, log },
    );
    expect(lines.some((l) => l.level === 40 && l.msg.includes("${NOT_SET_ANYWHERE} is not set"))).toBe(true);
    await m.ensureReady(60_000);
    expect(await call(registry, "mcp_s_env", { name: "GREETING" })).toBe("hello bob");
    expect(await call(registry, "mcp_s_env", { name: "EMPTY" })).toBe("[]");
    // Vitest sets PALAVER_LOG_LEVEL in this process: a child only gets PATH, HOME and the like.
    expect(process.env.PALAVER_LOG_LEVEL).toBeDefined();
    expect(await call(registry, "mcp_s_env", { name: "PALAVER_LOG_LEVEL" })).toBe("(unset)");
  });

  it("applies the allow and deny lists", async () => {
    const { manager: m, registry } = manager({
      s: stdio({ tools: { allow: ["echo", "add", "mcp_s_pid"], deny: ["add"] } }),
    });
    await m.ensureReady(60_000);
    expect(report(m, "s").tools.sort()).toEqual(["mcp_s_echo", "mcp_s_pid"]);
    expect(registry.names.sort()).toEqual(["mcp_s_echo", "mcp_s_pid"]);
  });

  it("saves images and blobs to the workspace media folder and caps long results", async () => {
    const { manager: m, registry } = manager({ s: stdio() }, { workspace: dir, maxResultChars: 500 });
    await m.ensureReady(60_000);
    const text = await call(registry, "mcp_s_media");
    const image = /\[image: image\/png, 70 bytes, saved to (media\/test\/c1\/mcp_s_media_\d+_1\.png)\]/.exec(
      text,
    );
    expect(image, text).not.toBeNull();
    expect(await readFile(join(dir, image![1]!))).toEqual(Buffer.from(PNG_BASE64, "base64"));
    expect(text).toContain("[resource file:///notes.txt (text/plain)]\nnote body");
    const blob =
      /\[resource file:\/\/\/data\.bin \(application\/octet-stream\): 4 bytes, saved to (media\/test\/c1\/\S+\.bin)\]/.exec(
        text,
      );
    expect(blob, text).not.toBeNull();
    expect(await readFile(join(dir, blob![1]!))).toEqual(Buffer.from([0, 1, 2, 3]));
    expect(text).toContain("[resource link: doc <https://example.invalid/doc> - a document]");

    const big = await call(registry, "mcp_s_big", { n: 5000 });
    expect(big.length).toBeLessThan(700);
    expect(big).toContain("truncated");
  });

  it("refreshes the tools on notifications/tools/list_changed", async () => {
    const { manager: m, registry } = manager({ s: stdio() });
    await m.ensureReady(60_000);
    expect(registry.has("mcp_s_fail")).toBe(true);
    expect(registry.has("mcp_s_added_later")).toBe(false);

    expect(await call(registry, "mcp_s_toggle")).toBe("toggled");
    await waitFor(
      () => registry.has("mcp_s_added_later") && !registry.has("mcp_s_fail"),
      5000,
      "the new tool list",
    );
    expect(report(m, "s").tools).toContain("mcp_s_added_later");
    expect(report(m, "s").tools).not.toContain("mcp_s_fail");
    expect(await call(registry, "mcp_s_added_later", { x: "y" })).toBe("added: y");

    await call(registry, "mcp_s_toggle");
    await waitFor(
      () => registry.has("mcp_s_fail") && !registry.has("mcp_s_added_later"),
      5000,
      "the old tool list",
    );
  });

  it("restarts a crashed server on the next call, then backs off if it keeps crashing", async () => {
    const { manager: m, registry } = manager({ s: stdio() }, { retryBaseMs: 60_000, retryMaxMs: 60_000 });
    await m.ensureReady(60_000);
    const first = await pidOf(registry, "s");

    const crashed = await call(registry, "mcp_s_crash");
    expect(crashed).toBe(
      'Error: the MCP server "s" closed the connection while running mcp_s_crash (it may have crashed). ' +
        "It will be restarted on the next call.",
    );
    await waitFor(() => !isAlive(first), 5000, "the crashed process to be gone");
    const down = report(m, "s");
    expect(down.state).toBe("failed");
    expect(down.error).toContain("the server process exited");
    expect(down.error).toContain("crashing on purpose"); // from its stderr
    expect(down.retryInMs).toBe(0);
    // Its tools stay registered, so the model can call them and bring it back.
    expect(registry.has("mcp_s_pid")).toBe(true);

    const second = await pidOf(registry, "s");
    expect(second).not.toBe(first);
    expect(report(m, "s").state).toBe("connected");
    expect(report(m, "s").pid).toBe(second);

    // Crashing again with no successful call in between: the restart waits out a backoff.
    await call(registry, "mcp_s_crash");
    await call(registry, "mcp_s_crash"); // restarts it at once (the first crash since a good call)...
    const refused = await call(registry, "mcp_s_pid"); // ...but a third crash in a row must wait
    expect(refused).toMatch(
      /^Error: the MCP server "s" is not available \(the server process exited.*palaver tries again in \d+ s\.$/,
    );
    expect(report(m, "s").retryInMs).toBeGreaterThan(1000);
  });
});

describe("remote servers", () => {
  it("talks Streamable HTTP with ${VAR}-expanded headers", async () => {
    const srv = await http("streamable-http", { "x-token": "secret-123" });
    const { log, lines } = captureLogger();
    const { manager: m, registry } = manager(
      { web: { url: srv.url, headers: { "X-Token": "${FAKE_TOKEN}", "X-Empty": "a${FAKE_MISSING}b" } } },
      { env: { FAKE_TOKEN: "secret-123" }, log },
    );
    await m.ensureReady(60_000);
    expect(report(m, "web")).toMatchObject({ state: "connected", transport: "streamable-http" });
    const headers = JSON.parse(await call(registry, "mcp_web_headers")) as Record<string, string>;
    expect(headers["x-token"]).toBe("secret-123");
    expect(headers["x-empty"]).toBe("ab");
    expect(lines.some((l) => l.level === 40 && l.msg.includes("${FAKE_MISSING} is not set"))).toBe(true);
    expect(srv.requests.every((r) => r.path === "/mcp")).toBe(true);
  });

  it("falls back to SSE when Streamable HTTP is refused, and uses SSE at once when told to", async () => {
    const srv = await http("sse");
    const { manager: m, registry } = manager({
      old: { url: srv.url },
      told: { url: srv.url, transport: "sse" },
    });
    await m.ensureReady(60_000);
    expect(report(m, "old")).toMatchObject({ state: "connected", transport: "sse" });
    expect(report(m, "told")).toMatchObject({ state: "connected", transport: "sse" });
    expect(await call(registry, "mcp_old_echo", { text: "over sse" })).toBe("echo: over sse");
    expect(await call(registry, "mcp_told_add", { a: 1, b: 1 })).toBe('{"sum":2}');
    // One refused POST /sse (the Streamable HTTP try of "old"), none for "told".
    expect(srv.requests.filter((r) => r.method === "POST" && r.path === "/sse")).toHaveLength(1);
  });

  it("cancels a call that exceeds toolTimeout, and the server receives the cancellation", async () => {
    const srv = await http("streamable-http");
    const { manager: m, registry } = manager({ web: { url: srv.url, toolTimeout: 0.3 } });
    await m.ensureReady(60_000);
    // Uncancelled, the call would end after 10 s with a result: the error text proves the cancel.
    const text = await call(registry, "mcp_web_slow", { ms: 10_000 });
    expect(text).toBe(
      'Error: mcp_web_slow did not finish within 0.3 s, so it was cancelled (the MCP server "web" was told to stop). ' +
        "It may be slow or stuck: try a smaller request, or go on without this tool.",
    );
    await waitFor(() => srv.state.cancelled.length === 1, 30_000, "the cancellation to reach the server");
    expect(srv.state.cancelled[0]).toContain("Request timed out");
  });

  it("cancels a call when the turn is stopped, and lets the abort through", async () => {
    const srv = await http("streamable-http");
    const { manager: m, registry } = manager({ web: { url: srv.url } });
    await m.ensureReady(60_000);
    const stop = new AbortController();
    const pending = call(registry, "mcp_web_slow", { ms: 10_000 }, stop.signal);
    await waitFor(() => srv.state.calls.includes("slow"), 30_000, "the call to start");
    stop.abort(new Error("stopped by /stop"));
    await expect(pending).rejects.toThrow("stopped by /stop");
    await waitFor(() => srv.state.cancelled.length === 1, 30_000, "the cancellation to reach the server");
    expect(srv.state.cancelled[0]).toContain("stopped by /stop");
  });
});

describe("failing servers", () => {
  it("do not delay startInBackground nor affect the other servers", async () => {
    const { manager: m, registry } = manager(
      {
        good: stdio(),
        missing: { command: join(dir, "no-such-program") },
        refusing: stdio({ env: { FAKE_MCP_FAIL_START: "1" } }),
        off: { command: "whatever", enabled: false },
      },
      // Long backoff: the states below stay put while they are checked.
      { retryBaseMs: 60_000, retryMaxMs: 60_000 },
    );
    m.startInBackground();
    // It only spawns the processes (synchronously); it never waits for a server to answer.
    expect(report(m, "good").state).toBe("connecting");
    expect(report(m, "refusing").state).toBe("connecting");

    await m.ensureReady(60_000);
    expect(report(m, "good").state).toBe("connected");
    expect(await call(registry, "mcp_good_echo", { text: "fine" })).toBe("echo: fine");
    expect(report(m, "missing")).toMatchObject({ state: "failed", tools: [] });
    expect(report(m, "missing").error).toContain("ENOENT");
    expect(report(m, "missing").retryInMs).toBeGreaterThan(20_000);
    expect(report(m, "refusing").state).toBe("failed");
    expect(report(m, "refusing").error).toContain("refusing to start"); // its stderr
    expect(report(m, "off")).toEqual({ name: "off", state: "disabled", tools: [] });
    expect(registry.names.every((n) => n.startsWith("mcp_good_"))).toBe(true);
  });

  it("retries a server that failed to start in the background, with backoff, until it comes up", async () => {
    const marker = join(dir, "may-start");
    const { manager: m, registry } = manager(
      { flaky: stdio({ env: { FAKE_MCP_NEEDS_FILE: marker } }) },
      { retryBaseMs: 200, retryMaxMs: 400 },
    );
    await m.ensureReady(60_000);
    expect(report(m, "flaky").state).toBe("failed");
    expect(registry.names).toEqual([]);

    // Once it can start, a background retry brings it up without any call.
    await writeFile(marker, "");
    await waitFor(() => report(m, "flaky").state === "connected", 8000, "the retry to succeed");
    expect(await call(registry, "mcp_flaky_echo", { text: "back" })).toBe("echo: back");
  });

  it("gives up on a server that does not answer within the connect timeout, and kills it", async () => {
    const pidFile = join(dir, "pid");
    // sh writes the pid at once and then becomes node (same pid): node itself can take longer than
    // the connect timeout to start on a loaded machine, and would be killed before writing it.
    const script = `echo $$ > '${pidFile}'; exec '${process.execPath}' -e 'setInterval(() => {}, 1000)'`;
    const { manager: m } = manager(
      { mute: { command: "sh", args: ["-c", script] } },
      { connectTimeoutMs: 2000, retryBaseMs: 60_000 },
    );
    await m.ensureReady(60_000);
    const r = report(m, "mute");
    expect(r.state).toBe("failed");
    expect(r.error).toContain("timed out after 2 s");
    const pid = Number(await readFile(pidFile, "utf8"));
    await waitFor(() => !isAlive(pid), 8000, "the mute server to be killed");
  });
});

describe("shutdown", () => {
  it("ends every server process, also one still starting, and removes the tools", async () => {
    const pidFile = join(dir, "pid");
    const script = `require("fs").writeFileSync(${JSON.stringify(pidFile)}, String(process.pid)); setInterval(() => {}, 1000);`;
    const srv = await http("streamable-http");
    const { manager: m, registry } = manager(
      {
        a: stdio(),
        b: stdio(),
        web: { url: srv.url },
        starting: { command: process.execPath, args: ["-e", script] },
      },
      // The stuck server's connect could only end by this: a shutdown that waited for it would hang.
      { connectTimeoutMs: 600_000 },
    );
    m.startInBackground();
    await waitFor(
      () => ["a", "b", "web"].every((s) => report(m, s).state === "connected"),
      10_000,
      "servers up",
    );
    await waitFor(
      () => existsSync(pidFile) && readFileSync(pidFile, "utf8") !== "",
      5000,
      "the stuck server to start",
    );
    const pids = [
      await pidOf(registry, "a"),
      await pidOf(registry, "b"),
      Number(await readFile(pidFile, "utf8")),
    ];
    expect(report(m, "a").pid).toBe(pids[0]);
    expect(report(m, "starting").state).toBe("connecting");
    for (const pid of pids) expect(isAlive(pid)).toBe(true);

    await m.shutdown(); // not held up by the stuck server's connect
    for (const pid of pids) expect(isAlive(pid), `pid ${pid}`).toBe(false);
    expect(registry.names).toEqual([]);
    expect(m.status().map((s) => s.state)).toEqual(["stopped", "stopped", "stopped", "stopped"]);
    // The Streamable HTTP session was ended politely.
    expect(srv.requests.some((r) => r.method === "DELETE")).toBe(true);
  });
});
