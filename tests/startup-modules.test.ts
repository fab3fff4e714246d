/**
 * A Telegram-only gateway loads only what its configuration uses: no MCP SDK
 * without tools.mcpServers, no HTML converter before the first web_fetch of a
 * page, no pino-pretty while logs are JSON, no openai SDK before the first turn. The child runs with a module
 * loader hook (--import) that writes every module URL it loads to a file,
 * read once the gateway long-polls Telegram (ready for messages).
 */
import { readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { GatewayHarness, isLongPoll } from "./helpers/gateway-process.js";

// Runs in the loader's thread: appends each loaded module's URL to MODULE_TRACE.
const HOOK = `
import { register } from "node:module";
register("data:text/javascript," + encodeURIComponent(\`
import { appendFileSync } from "node:fs";
export async function load(url, context, next) {
  const result = await next(url, context);
  appendFileSync(process.env.MODULE_TRACE, url + "\\\\n");
  return result;
}\`));
`;

describe("gateway startup, Telegram only", () => {
  const h = new GatewayHarness({ prefix: "palaver-startup-modules-" });
  beforeEach(() => h.start());
  afterEach(() => h.close());

  it("does not load the MCP SDK, the HTML converter, pino-pretty or the openai SDK", async () => {
    const hook = join(h.dir, "trace-hook.mjs");
    const trace = join(h.dir, "modules.txt");
    await writeFile(hook, HOOK);
    const run = h.spawnGateway({
      env: { NODE_OPTIONS: `--import ${pathToFileURL(hook).href}`, MODULE_TRACE: trace },
    });
    const died = run.exited.then((code) => {
      throw new Error(`the gateway exited (${code}):\n${run.stderr}`);
    });
    died.catch(() => undefined);
    await Promise.race([h.tg.waitForCall("getUpdates", isLongPoll, h.startupMs), died]);

    const loaded = (await readFile(trace, "utf8")).split("\n");
    const any = (part: string) => loaded.some((url) => url.includes(part));
    // The probe works: what a Telegram gateway needs was seen.
    expect(any("/node_modules/grammy/")).toBe(true);
    expect(any("/src/channels/telegram/adapter.ts")).toBe(true);
    // What this configuration does not use was not loaded.
    expect(loaded.filter((url) => url.includes("@modelcontextprotocol"))).toEqual([]);
    expect(loaded.filter((url) => /\/src\/mcp\/(manager|server|convert)\.ts/.test(url))).toEqual([]);
    expect(
      loaded.filter(
        (url) => /\/src\/agent\/tools\/html(-\w+)?\.ts/.test(url) && !url.includes("html-entities"),
      ),
    ).toEqual([]);
    expect(loaded.filter((url) => url.includes("pino-pretty"))).toEqual([]);
    // The openai SDK waits for the first turn (its error classes alone are loaded).
    expect(loaded.filter((url) => /\/node_modules\/openai\/(index|client)\.m?js/.test(url))).toEqual([]);
    // Other platforms' SDKs stay unloaded too.
    expect(
      loaded.filter((url) => /\/node_modules\/(@slack|@discordjs|discord\.js|discord-api-types)\//.test(url)),
    ).toEqual([]);
  });
});
