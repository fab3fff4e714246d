/**
 * A Telegram-only gateway (the build in dist/, its packages resolved by Node from node_modules)
 * loads only what its configuration uses: not the Slack or Discord SDK nor their adapters, no MCP
 * SDK without tools.mcpServers, no HTML converter before the first web_fetch of a page, no
 * pino-pretty while logs are JSON, no proxy agent without a proxy, no tar outside `palaver backup`,
 * no openai client before the first LLM call, and no PostgreSQL client (pg, pg-boss) without
 * cluster.database.
 * The one-process commands that may read the cluster's database (status, cron, pairing, approvals)
 * load no PostgreSQL client either.
 * The child runs with a preload (--import) that records every module it loads: ES modules through
 * a load hook (module.register), CommonJS ones from require.cache, written as the child exits; the
 * test stops the gateway once it long-polls Telegram (ready for messages).
 */
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { runCli } from "./helpers/cli.js";
import { GatewayHarness, isLongPoll } from "./helpers/gateway-process.js";

// The load hook runs in the loader's thread and appends each ES module's URL to MODULE_TRACE; the
// CommonJS modules (require.cache, one cache for the whole process) are appended at exit.
const PRELOAD = `
import { appendFileSync } from "node:fs";
import { createRequire, register } from "node:module";
import { pathToFileURL } from "node:url";
register("data:text/javascript," + encodeURIComponent(\`
import { appendFileSync } from "node:fs";
export async function load(url, context, next) {
  const result = await next(url, context);
  appendFileSync(process.env.MODULE_TRACE, url + "\\\\n");
  return result;
}\`));
const { cache } = createRequire(import.meta.url);
process.on("exit", () => {
  const files = Object.keys(cache).map((file) => pathToFileURL(file).href);
  appendFileSync(process.env.MODULE_TRACE, files.join("\\n") + "\\n");
});
`;

/** The PostgreSQL client and the job queue over it: cluster mode's packages. */
const POSTGRES = /\/node_modules\/pg(-boss)?\//;

describe("gateway startup, Telegram only", () => {
  const h = new GatewayHarness({ prefix: "palaver-startup-modules-" });
  beforeEach(() => h.start());
  afterEach(() => h.close());

  it("does not load the Slack or Discord SDK, the MCP SDK, the HTML converter, pino-pretty, a proxy agent, tar, the openai client or the PostgreSQL client", async () => {
    const preload = join(h.dir, "trace-modules.mjs");
    const trace = join(h.dir, "modules.txt");
    await writeFile(preload, PRELOAD);
    const run = h.spawnGateway({
      env: { NODE_OPTIONS: `--import ${pathToFileURL(preload).href}`, MODULE_TRACE: trace },
    });
    const died = run.exited.then((code) => {
      throw new Error(`the gateway exited (${code}):\n${run.stderr}`);
    });
    died.catch(() => undefined);
    await Promise.race([h.tg.waitForCall("getUpdates", isLongPoll, h.startupMs), died]);
    run.child.kill("SIGTERM");
    expect(await run.exited).toBe(0);

    const loaded = (await readFile(trace, "utf8")).split("\n");
    const any = (pattern: RegExp) => loaded.some((url) => pattern.test(url));
    // The probe works: what a Telegram gateway needs was seen, ES modules and CommonJS alike.
    expect(any(/\/dist\/channels\/telegram\/adapter-\w+\.js$/)).toBe(true);
    expect(any(/\/node_modules\/grammy\/.*\.js$/)).toBe(true);
    expect(any(/\/node_modules\/pino\/.*\.js$/)).toBe(true);
    // Other platforms' SDKs and adapters stay unloaded.
    expect(
      loaded.filter((url) => /\/node_modules\/(@slack|@discordjs|discord\.js|discord-api-types)\//.test(url)),
    ).toEqual([]);
    expect(loaded.filter((url) => /\/dist\/channels\/(slack|discord)\//.test(url))).toEqual([]);
    // What this configuration does not use was not loaded.
    expect(loaded.filter((url) => url.includes("@modelcontextprotocol"))).toEqual([]);
    expect(loaded.filter((url) => /\/dist\/mcp\/manager-\w+\.js$/.test(url))).toEqual([]);
    expect(loaded.filter((url) => /\/dist\/agent\/tools\/html-\w+\.js$/.test(url))).toEqual([]);
    expect(loaded.filter((url) => url.includes("pino-pretty"))).toEqual([]);
    // No proxy configured: no proxy agent; no backup command: no tar.
    expect(loaded.filter((url) => url.includes("https-proxy-agent"))).toEqual([]);
    expect(loaded.filter((url) => /\/node_modules\/tar\//.test(url))).toEqual([]);
    // One process (no cluster.database): neither PostgreSQL client nor job queue.
    expect(loaded.filter((url) => POSTGRES.test(url))).toEqual([]);
    // No LLM call yet: the openai client loads with the first (its error classes are all it needs before).
    expect(loaded.filter((url) => /\/node_modules\/openai\/(?!(core\/|internal\/)?error)/.test(url))).toEqual(
      [],
    );
  });
});

describe("one-process commands", () => {
  let dir: string;
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), "palaver-startup-modules-cli-"));
    await writeFile(join(dir, "trace-modules.mjs"), PRELOAD);
  });
  afterEach(() => rm(dir, { recursive: true, force: true }));

  /** Runs `palaver <args>` on `config` with the preload; the modules it loaded. */
  async function modulesOf(name: string, args: string[], config: object): Promise<string[]> {
    const configPath = join(dir, `${name}.json`);
    const trace = join(dir, `${name}.txt`);
    await writeFile(
      configPath,
      JSON.stringify({ agents: { defaults: { workspace: join(dir, "ws") } }, ...config }),
    );
    const run = await runCli(args, {
      cwd: dir,
      env: {
        HOME: dir,
        PALAVER_CONFIG: configPath,
        PALAVER_LOG_LEVEL: "silent",
        NODE_OPTIONS: `--import ${pathToFileURL(join(dir, "trace-modules.mjs")).href}`,
        MODULE_TRACE: trace,
      },
    });
    expect(run.code, run.stderr).toBe(0);
    return (await readFile(trace, "utf8")).split("\n");
  }

  it("status, cron list, pairing list and approvals list load no PostgreSQL client without cluster.database", async () => {
    const commands = [["status"], ["cron", "list"], ["pairing", "list"], ["approvals", "list"]];
    for (const args of commands) {
      const loaded = await modulesOf(args.join("-"), args, {});
      expect(loaded.some((url) => /\/node_modules\/commander\//.test(url))).toBe(true);
      expect(loaded.filter((url) => POSTGRES.test(url))).toEqual([]);
    }
    // The probe sees it: with cluster.database set, status loads it (and reports the database unreachable).
    const cluster = await modulesOf("cluster-status", ["status"], {
      cluster: { database: "postgres://palaver@127.0.0.1:1/palaver" },
    });
    expect(cluster.some((url) => POSTGRES.test(url))).toBe(true);
  });
});
