/**
 * Issue 41: no platform's token and no LLM key reaches the logs of a run where
 * everything fails. The real `palaver gateway` as a child process with
 * Telegram, Slack (bot token, app token, signing secret) and Discord tokens
 * the loopback fakes refuse with their 401s, and an LLM that answers errors
 * quoting the key back (as OpenAI's "Incorrect API key provided: sk-…" does).
 * Its whole stdout and stderr, and every file it left in its state folder,
 * must hold none of the secrets, not even inside a URL or an error body.
 * tests/log-secrets.test.ts checks the redaction rules in process.
 */
import { readdir, readFile } from "node:fs/promises";
import { join } from "node:path";
import { afterEach, beforeEach, expect, it } from "vitest";
import { FakeDiscord } from "../fakes/discord-server.js";
import { FakeSlack } from "../fakes/slack-server.js";
import { FakeTelegram } from "../fakes/telegram-server.js";
import { GatewayHarness, isLongPoll, writeGatewayConfig } from "../helpers/gateway-process.js";
import { waitFor } from "../helpers/wait.js";

// Each distinct from anything the fakes or the harness would print on their own.
const TELEGRAM_TOKEN = "918273645:AAsecretTelegramTokenQZX_0123456789abc";
const SLACK_BOT_TOKEN = "xoxb-secret-slack-bot-token-QZX0123";
const SLACK_APP_TOKEN = "xapp-1-secret-slack-app-token-QZX4567";
const SLACK_SIGNING_SECRET = "secret-slack-signing-QZX89ab";
const DISCORD_TOKEN = "MTIzNDU2Nzg5.secret-discord-token.QZXcdef";
const LLM_KEY = "sk-secret-llm-key-QZX-ghijklmnop";
const SECRETS = [
  TELEGRAM_TOKEN,
  SLACK_BOT_TOKEN,
  SLACK_APP_TOKEN,
  SLACK_SIGNING_SECRET,
  DISCORD_TOKEN,
  LLM_KEY,
];
// The parts that identify a secret on their own (a Bot API URL carries the token after "bot").
const FRAGMENTS = [
  "AAsecretTelegramTokenQZX",
  "secret-slack-bot",
  "secret-slack-app",
  "secret-discord-token",
  "secret-llm-key",
];

const harness = new GatewayHarness({ prefix: "palaver-log-secrets-", telegram: false, startupMs: 45_000 });
const WAIT_MS = 20_000;
let tg: FakeTelegram;
let slack: FakeSlack;
let discord: FakeDiscord;

beforeEach(async () => {
  await harness.start();
  // Telegram accepts the configured token at first, so messages reach the (failing) LLM.
  tg = await FakeTelegram.start({ token: TELEGRAM_TOKEN });
  // Slack takes the bot token and refuses the app token (Socket Mode cannot open); Discord knows
  // another token: every call palaver makes gets its 401.
  slack = await FakeSlack.start({ botToken: SLACK_BOT_TOKEN });
  discord = await FakeDiscord.start();
  harness.onClose(async () => {
    await tg.close();
    await slack.close();
    await discord.close();
  });
});

afterEach(() => harness.close());

/** Every file under `dir` but the config (which holds the secrets on purpose), as text. */
async function stateFiles(dir: string): Promise<Map<string, string>> {
  const out = new Map<string, string>();
  for (const entry of await readdir(dir, { recursive: true, withFileTypes: true })) {
    if (!entry.isFile()) continue;
    const path = join(entry.parentPath, entry.name);
    if (path === join(dir, "config.json")) continue;
    out.set(path, await readFile(path, "utf8"));
  }
  return out;
}

it("a run where every platform and the LLM fail logs none of the tokens or the key", async () => {
  const { dir, llm } = harness;
  const keyEcho = (status: number) => ({
    status,
    errorBody: { error: { message: `Incorrect API key provided: ${LLM_KEY}.`, type: "x", code: "x" } },
  });
  llm.enqueue(keyEcho(401), keyEcho(400));
  harness.configPath = await writeGatewayConfig(
    dir,
    { llmBaseURL: llm.baseURL, telegram: tg, slack, discord },
    {
      channels: {
        slack: { botToken: SLACK_BOT_TOKEN, appToken: SLACK_APP_TOKEN, signingSecret: SLACK_SIGNING_SECRET },
        discord: { token: DISCORD_TOKEN },
      },
      providers: { custom: { apiKey: LLM_KEY } },
    },
  );
  const run = harness.spawnGateway();
  await tg.waitFor(() => tg.callsTo("getUpdates").some(isLongPoll), harness.startupMs, "the long poll");
  // Slack and Discord were really given the secrets, and refused them.
  await waitFor(
    () => slack.calls.some((c) => c.method === "apps.connections.open" && c.token === SLACK_APP_TOKEN),
    WAIT_MS,
    "Socket Mode opened with the configured app token",
  );
  await waitFor(() => discord.requests.some((r) => r.status === 401), WAIT_MS, "Discord's 401");
  await waitFor(
    () => /slack/i.test(run.stderr) && /discord/i.test(run.stderr),
    WAIT_MS,
    "both failures logged",
  );

  // The LLM refuses the key, then quotes it in a 400 whose reason the user is shown.
  tg.userMessage({ text: "first" });
  await tg.waitForSent((m) => /API key/.test(m.text ?? ""), WAIT_MS);
  tg.userMessage({ text: "second" });
  await tg.waitForSent((m) => /Incorrect API key provided/.test(m.text ?? ""), WAIT_MS);
  await tg.waitFor(() => llm.requests.length === 2, WAIT_MS, "both LLM calls");

  // Then Telegram revokes the token: the next poll gets 401 with the token in its URL.
  const before = tg.callsTo("getUpdates").length;
  tg.token = "111:another-token";
  await tg.waitFor(() => tg.callsTo("getUpdates").length > before, WAIT_MS, "a poll with the revoked token");
  await run.stderrIncludes("401");

  run.child.kill("SIGTERM");
  await run.exited;

  const outputs = new Map<string, string>([
    ["stdout", run.stdout],
    ["stderr", run.stderr],
    ...(await stateFiles(dir)),
  ]);
  for (const [where, text] of outputs) {
    for (const secret of [...SECRETS, ...FRAGMENTS]) {
      expect(text.includes(secret), `${secret} in ${where}`).toBe(false);
    }
  }
  // The failures were logged (what failed, where), only without the secrets.
  expect(run.stderr).toContain("Incorrect API key provided: [redacted]");
});
