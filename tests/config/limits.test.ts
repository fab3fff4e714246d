/**
 * Issue 11: config values that used to pass validation and then misbehave at
 * run time (timers that overflow to 1 ms, ids JSON has rounded, regexes that
 * stop the gateway, passwords in apiBase) are refused by loadConfig, with the
 * path of the key in the message.
 */
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { loadConfig } from "../../src/config/load.js";
import { ConfigError } from "../../src/util/errors.js";
import { MAX_TIMER_MS, MAX_TIMER_SECONDS, secondsToTimerMs, timerDelay } from "../../src/util/timers.js";

let dir: string;
let configPath: string;

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), "palaver-limits-"));
  configPath = join(dir, "config.json");
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** Writes `text` (raw JSON, so numbers are exactly as a user typed them) and loads it. */
async function load(text: string) {
  await writeFile(configPath, text);
  return loadConfig({ configPath, env: {}, cwd: dir, loadDotenv: false });
}

async function problems(text: string): Promise<string[]> {
  try {
    await load(text);
  } catch (err) {
    if (err instanceof ConfigError) return err.problems;
    throw err;
  }
  throw new Error("expected a ConfigError");
}

describe("durations fit in a Node timer", () => {
  // Each of these reaches setTimeout/setInterval/AbortSignal.timeout; above 2^31-1 ms Node fires after 1 ms.
  const durations: [string, (v: number) => unknown][] = [
    ["gateway.heartbeat.intervalSeconds", (v) => ({ gateway: { heartbeat: { intervalSeconds: v } } })],
    ["gateway.heartbeat.intervalS", (v) => ({ gateway: { heartbeat: { intervalS: v } } })],
    ["tools.exec.timeout", (v) => ({ tools: { exec: { timeout: v } } })],
    ["tools.web.fetch.timeout", (v) => ({ tools: { web: { fetch: { timeout: v } } } })],
    ["agents.defaults.llm.timeout", (v) => ({ agents: { defaults: { llm: { timeout: v } } } })],
    ["agents.defaults.llm.retryBaseDelay", (v) => ({ agents: { defaults: { llm: { retryBaseDelay: v } } } })],
    ["agents.defaults.llm.retryMaxDelay", (v) => ({ agents: { defaults: { llm: { retryMaxDelay: v } } } })],
    [
      "agents.defaults.llm.breakerCooldown",
      (v) => ({ agents: { defaults: { llm: { breakerCooldown: v } } } }),
    ],
    [
      "tools.mcpServers.x.toolTimeout",
      (v) => ({ tools: { mcpServers: { x: { command: "x", toolTimeout: v } } } }),
    ],
  ];

  it.each(durations)("%s above 2,147,483 s is refused with its path", async (path, make) => {
    const found = await problems(JSON.stringify(make(3_000_000)));
    expect(found).toEqual([`${path}: expected a number <= 2147483, got 3000000`]);
  });

  it.each(durations)("%s of exactly the maximum is accepted", async (_path, make) => {
    await expect(load(JSON.stringify(make(MAX_TIMER_SECONDS)))).resolves.toBeDefined();
  });

  it("the issue's two examples: heartbeat 3,000,000 s and exec timeout 1e7", async () => {
    const found = await problems(
      '{"gateway":{"heartbeat":{"intervalSeconds":3000000}},"tools":{"exec":{"timeout":1e7}}}',
    );
    expect(found).toEqual([
      "tools.exec.timeout: expected a number <= 2147483, got 10000000",
      "gateway.heartbeat.intervalSeconds: expected a number <= 2147483, got 3000000",
    ]);
  });

  it("timerDelay clamps what reaches a timer by another road", () => {
    expect(MAX_TIMER_SECONDS * 1000).toBeLessThanOrEqual(MAX_TIMER_MS);
    expect(timerDelay(1e12)).toBe(MAX_TIMER_MS);
    expect(timerDelay(Infinity)).toBe(MAX_TIMER_MS);
    expect(timerDelay(-5)).toBe(0);
    expect(timerDelay(Number.NaN)).toBe(0);
    expect(secondsToTimerMs(1.5)).toBe(1500);
    expect(secondsToTimerMs(3_000_000)).toBe(MAX_TIMER_MS);
  });
});

describe("ids written as JSON numbers", () => {
  it("refuses a number JSON has rounded (a Discord snowflake) and says to write ids as strings", async () => {
    // 803302812312584213 parses as 803302812312584200: a different user.
    const found = await problems('{"channels":{"discord":{"allowFrom":[803302812312584213]}}}');
    expect(found).toHaveLength(1);
    expect(found[0]).toMatch(/^channels\.discord\.allowFrom\[0\]: .*write ids as strings/);
  });

  it("refuses unsafe numbers in every channel's id lists", async () => {
    const big = "1234567890123456789";
    const found = await problems(
      `{"channels":{"telegram":{"allowFrom":[${big}],"groupAllowFrom":[${big}]},` +
        `"slack":{"allowFrom":[${big}],"dm":{"allowFrom":[${big}]},"groupAllowFrom":[${big}]},` +
        `"discord":{"groupAllowFrom":[${big}]}}}`,
    );
    expect(found.map((p) => p.split(":")[0]).sort()).toEqual(
      [
        "channels.discord.groupAllowFrom[0]",
        "channels.slack.allowFrom[0]",
        "channels.slack.dm.allowFrom[0]",
        "channels.slack.groupAllowFrom[0]",
        "channels.telegram.allowFrom[0]",
        "channels.telegram.groupAllowFrom[0]",
      ].sort(),
    );
    for (const p of found) expect(p).toContain("write ids as strings");
  });

  it("accepts exact numbers (as strings) and strings as they are", async () => {
    const loaded = await load('{"channels":{"telegram":{"allowFrom":[12345, "803302812312584213", "*"]}}}');
    expect(loaded.config.channels.telegram.allowFrom).toEqual(["12345", "803302812312584213", "*"]);
  });
});

describe("regular expressions", () => {
  it("refuses an invalid denyPatterns entry with its path and the reason", async () => {
    const found = await problems('{"tools":{"exec":{"denyPatterns":["rm\\\\s+-rf", "(unclosed"]}}}');
    expect(found).toHaveLength(1);
    expect(found[0]).toMatch(/^tools\.exec\.denyPatterns\[1\]: not a valid regular expression: .*/);
  });

  it("accepts valid ones", async () => {
    const loaded = await load('{"tools":{"exec":{"denyPatterns":["\\\\bshutdown\\\\b"]}}}');
    expect(loaded.config.tools.exec.denyPatterns).toEqual(["\\bshutdown\\b"]);
  });
});

describe("credentials in apiBase", () => {
  it("are refused with a message that says where they belong", async () => {
    const found = await problems(
      '{"providers":{"openai":{"apiBase":"https://user:hunter22@llm.example/v1"},' +
        '"vllm":{"apiBase":"http://tok3n@127.0.0.1:8000/v1"}}}',
    );
    expect(found.sort()).toEqual([
      "providers.openai.apiBase: put credentials in apiKey or extraHeaders, not in the URL",
      "providers.vllm.apiBase: put credentials in apiKey or extraHeaders, not in the URL",
    ]);
    expect(found.join("\n")).not.toContain("hunter22");
  });

  it("a plain apiBase is fine", async () => {
    const loaded = await load('{"providers":{"openai":{"apiBase":"http://127.0.0.1:8000/v1"}}}');
    expect(loaded.config.providers.openai!.apiBase).toBe("http://127.0.0.1:8000/v1");
  });
});
