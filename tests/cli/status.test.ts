import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { buildStatus, countSessions, formatStatus } from "../../src/cli/status.js";
import { loadConfig } from "../../src/config/load.js";

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), "palaver-status-"));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe("status", () => {
  it("counts only sessions/*.jsonl files, and 0 without a sessions folder", async () => {
    expect(countSessions(join(dir, "missing"))).toBe(0);
    await mkdir(join(dir, "sessions", "nested.jsonl"), { recursive: true });
    await writeFile(join(dir, "sessions", "a.jsonl"), "");
    await writeFile(join(dir, "sessions", "b.jsonl.bak"), "");
    expect(countSessions(dir)).toBe(1);
  });

  it("builds a report from the loaded config and formats it without secrets", async () => {
    const configPath = join(dir, "config.json");
    await writeFile(
      configPath,
      JSON.stringify({
        providers: {
          openrouter: { apiKey: "sk-or-very-secret-1" },
          local: { apiBase: "http://127.0.0.1:1/v1" },
        },
        channels: { slack: { enabled: true } },
      }),
    );
    const loaded = loadConfig({ configPath, workspace: join(dir, "ws"), env: {}, cwd: dir });
    const report = buildStatus(loaded);
    expect(report).toEqual({
      config: { path: configPath, exists: true },
      workspace: { path: join(dir, "ws"), exists: false },
      model: "gpt-4o-mini",
      provider: "auto",
      // The keyed gateway wins; "local" (the user's apiBase, no key) is only for when nothing has a key.
      llm: {
        provider: "openrouter",
        baseURL: "https://openrouter.ai/api/v1",
        model: "gpt-4o-mini",
        rule: "priority",
        reason: "the first provider with an API key (gateways first)",
        warnings: [],
      },
      providers: { openrouter: { apiKeySet: true }, local: { apiKeySet: false } },
      channels: ["slack"],
      // Enabled without its tokens: said here, and the gateway will not start it.
      problems: [
        "channels.slack.botToken is empty: paste the app's Bot User OAuth Token (xoxb-...)",
        "channels.slack.appToken is empty: Socket Mode needs an app-level token (xapp-...) with connections:write",
      ],
      sessions: 0,
      pairing: { approved: 0, pending: 0 },
      gateway: { running: false },
      held: {},
      memory: { unavailable: "no index yet (built when the gateway starts)" },
    });
    const text = formatStatus(report);
    expect(text).toContain("providers  openrouter (key set), local (no key)");
    expect(text).toContain(
      "provider   auto → openrouter at https://openrouter.ai/api/v1 with model gpt-4o-mini " +
        "(the first provider with an API key (gateways first))",
    );
    expect(text).toContain("channels   slack");
    expect(text).toContain(
      "problem    channels.slack.botToken is empty: paste the app's Bot User OAuth Token",
    );
    expect(text).toContain(
      "problem    channels.slack.appToken is empty: Socket Mode needs an app-level token",
    );
    expect(text).toContain(`workspace  ${join(dir, "ws")} (missing: run \`palaver onboard\`)`);
    expect(text).not.toContain("sk-or-very-secret-1");
  });
});
