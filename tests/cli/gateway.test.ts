import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { createServer, type Socket } from "node:net";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { startCli } from "../helpers/cli.js";
import { healthUrlFromLog } from "../helpers/gateway-process.js";
import { waitFor } from "../helpers/wait.js";

describe("palaver gateway (child process)", () => {
  let dir: string;
  let configPath: string;
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), "palaver-gw-"));
    configPath = join(dir, "config.json");
    await writeFile(
      configPath,
      JSON.stringify({
        agents: { defaults: { workspace: join(dir, "ws"), provider: "custom" } },
        providers: { custom: { apiBase: "http://127.0.0.1:9/v1" } },
        gateway: { port: 0 },
      }),
    );
  });
  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  const gateway = () => startCli(["gateway", "--config", configPath], { cwd: dir, env: { HOME: dir } });
  /** Rewrites the config with these channel sections. */
  const setChannels = async (channels: Record<string, unknown>) => {
    const config = JSON.parse(await readFile(configPath, "utf8")) as Record<string, unknown>;
    await writeFile(configPath, JSON.stringify({ ...config, channels }));
  };

  it("with nothing else enabled, serves the web chat and prints one line saying where", async () => {
    const run = gateway();
    await run.stderrIncludes("gateway running");
    const line = /Chat with palaver at (http:\/\/127\.0\.0\.1:\d+\/)#token=([\w-]+)/.exec(run.stderr);
    expect(line).not.toBeNull();
    expect(run.stderr.match(/Chat with palaver at/g)).toHaveLength(1);
    expect(run.stderr).not.toMatch(/no channels are running/);
    const [, url, token] = line!;
    expect((await readFile(join(dir, "web", "token"), "utf8")).trim()).toBe(token);
    expect((await fetch(`${url}api/me`)).status).toBe(401);
    expect((await fetch(`${url}api/me`, { headers: { authorization: `Bearer ${token}` } })).status).toBe(200);
    run.child.kill("SIGTERM");
    expect(await run.exited).toBe(0);
  });

  it("keeps running with no channels, says so, and exits 0 on SIGTERM", async () => {
    await setChannels({ web: { enabled: false } });
    const run = gateway();
    await run.stderrIncludes("gateway running");
    // Still serving after start (not a fixed wait): its health endpoint answers, the process has not exited.
    const url = healthUrlFromLog(run.stderr);
    expect(url).toBeDefined();
    expect((await fetch(`${url}/healthz`)).status).toBe(200);
    expect(run.child.exitCode).toBeNull();
    run.child.kill("SIGTERM");
    expect(await run.exited).toBe(0);
    expect(run.stderr).toMatch(/no channels are running/);
    expect(run.stderr).toMatch(/stopped/);
  });

  it("does not start an enabled platform with config problems, says why at start and on reload", async () => {
    await setChannels({ telegram: { enabled: true, allowFrom: ["1"] } });
    const run = gateway();
    await run.stderrIncludes("gateway running");
    expect(run.stderr).toMatch(/channels\.telegram\.token is empty: create a bot with @BotFather/);
    expect(run.stderr).toMatch(/channel telegram is not started/);
    // Issue 12: it used to say "enable one in the config", about a platform that is enabled.
    expect(run.stderr).toMatch(/no channels are running: the enabled ones could not be started/);
    expect(run.stderr).not.toMatch(/enable one in the config/);

    await setChannels({
      slack: { enabled: true, allowFrom: ["U1"], botToken: "xoxb-1", appToken: "xoxb-2" },
    });
    run.child.kill("SIGHUP");
    await run.stderrIncludes("channel slack is not started");
    expect(run.stderr).toMatch(/channels\.slack\.appToken must be an app-level token \(xapp-\.\.\.\)/);
    expect(run.child.exitCode).toBeNull();
    run.child.kill("SIGTERM");
    expect(await run.exited).toBe(0);
  });

  it("keeps running with the old config when SIGHUP finds the new one invalid", async () => {
    const run = gateway();
    await run.stderrIncludes("gateway running");
    await writeFile(configPath, JSON.stringify({ agents: { defaults: { maxTokens: "lots" } } }));
    run.child.kill("SIGHUP");
    await run.stderrIncludes("config reload refused");
    expect(run.stderr).toMatch(/agents\.defaults\.maxTokens/);
    expect(run.child.exitCode).toBeNull();
    run.child.kill("SIGTERM");
    expect(await run.exited).toBe(0);
  });
  it("stops at once on SIGTERM while a channel is still connecting, and says so", async () => {
    // A Telegram API that accepts connections and never answers: getMe hangs until its timeout.
    const sockets = new Set<Socket>();
    let connected!: () => void;
    const firstConnection = new Promise<void>((resolve) => (connected = resolve));
    const silent = createServer((socket) => {
      sockets.add(socket);
      connected();
    });
    await new Promise<void>((resolve) => silent.listen(0, "127.0.0.1", resolve));
    const { port } = silent.address() as { port: number };
    try {
      await setChannels({
        telegram: { enabled: true, token: "123:abc", allowFrom: ["1"], apiRoot: `http://127.0.0.1:${port}` },
      });
      const run = gateway();
      await firstConnection; // the channel is connecting
      run.child.kill("SIGTERM");
      expect(await run.exited).toBe(0);
      expect(run.stderr).toMatch(/stop requested while starting: pending connections are abandoned/);
      expect(run.stderr).not.toMatch(/gateway running/);
    } finally {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => silent.close(() => resolve()));
    }
  });

  it("exits promptly on SIGTERM while Slack's Web API client is still retrying an unreachable Slack", async () => {
    await setChannels({
      slack: {
        enabled: true,
        mode: "socket",
        botToken: "xoxb-test",
        appToken: "xapp-test",
        apiUrl: "http://127.0.0.1:9/api/", // nothing listens: every call is refused, then retried
        allowFrom: ["U1"],
      },
    });
    const run = gateway();
    try {
      await run.stderrIncludes("http request failed"); // the client is in its retry loop
      run.child.kill("SIGTERM");
      // Its retries would go on for ~45 s; the stopped gateway must not wait for them.
      await waitFor(() => run.child.exitCode !== null, 20_000, "the gateway to exit");
      expect(run.child.exitCode).toBe(0);
      expect(run.stderr).toMatch(/"msg":"stopped"/);
    } finally {
      run.child.kill("SIGKILL");
      await run.exited;
    }
  });
});
