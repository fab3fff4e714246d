/**
 * A stranger who blocks the bot gives their pairing code back: a Gateway with the real Telegram
 * adapter (real grammy) against FakeTelegram, which keeps allowed_updates as Telegram does, so a bot
 * that does not ask for my_chat_member never hears of the block.
 */
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { afterEach, beforeEach, expect, it } from "vitest";
import { pairingPath, PairingStore } from "../../../src/pairing/store.js";
import { lastUserText } from "../../fakes/openai-server.js";
import type { FakeTelegram } from "../../fakes/telegram-server.js";
import { captureLog } from "../../helpers/log.js";
import { waitFor } from "../../helpers/wait.js";
import { TelegramGatewayRig } from "./helpers.js";

const OWNER = 42;
const STRANGER = 7;
const CODE = /pairing code: ([A-Z2-9]{8})/;

let rig: TelegramGatewayRig;
let dir: string;
let fake: FakeTelegram;

beforeEach(async () => {
  rig = await TelegramGatewayRig.create("palaver-tg-leave-");
  ({ dir, tg: fake } = rig);
  rig.llm.setHandler((req) => ({ content: `re: ${lastUserText(req)}` }));
  // dmPolicy is left out: "pairing" is the default.
  await rig.start({
    channels: { streaming: false },
    telegram: { allowFrom: [String(OWNER)] },
    log: captureLog().log,
  });
});

afterEach(() => rig.close());

const texts = () => fake.sent.flatMap((m) => m.text ?? []);
const pending = () => new PairingStore(pairingPath(dir), { log: captureLog().log }).pending();

function send(from: number, text: string): void {
  fake.userMessage({ from: { id: from, first_name: `user ${from}` }, text });
}

/** The owner writes in their own chat; resolves once the bot's answer containing `answer` is there. */
async function ownerSays(text: string, answer: string): Promise<string> {
  send(OWNER, text);
  await waitFor(() => texts().some((t) => t.includes(answer)), undefined, `the answer to ${text}`);
  return texts().find((t) => t.includes(answer))!;
}

it("asks Telegram for my_chat_member, when polling", async () => {
  await fake.waitFor(() => fake.allowedUpdates, 5000, "allowed_updates");
  expect(fake.allowedUpdates).toContain("my_chat_member");
});

it("a stranger who blocks the bot loses their pending code, silently; the owner's approve then fails", async () => {
  send(STRANGER, "hi, can we talk?");
  await waitFor(() => texts().some((t) => CODE.test(t)), undefined, "the pairing code");
  const code = CODE.exec(texts().find((t) => CODE.test(t))!)![1]!;
  expect(pending().map((p) => p.senderId)).toEqual([String(STRANGER)]);
  const sentBefore = fake.sent.length;

  fake.userBlocksBot({ id: STRANGER, first_name: `user ${STRANGER}` });
  await waitFor(() => pending().length === 0, undefined, "the stranger's code dropped");

  // Updates are handled in order: once the owner's /pairing is answered, the block was handled too.
  const answer = await ownerSays(`/pairing approve ${code}`, `No open pairing code ${code}`);
  expect(answer).toMatch(/mistyped, expired/);
  // The block caused no message: the only new one is the owner's answer, in the owner's chat.
  expect(fake.sent.slice(sentBefore).map((m) => String(m.chatId))).toEqual([String(OWNER)]);
  expect(
    new PairingStore(pairingPath(dir), { log: captureLog().log }).isApproved("telegram", String(STRANGER)),
  ).toBe(false);
  expect(rig.llm.requests).toHaveLength(0);
  const journal = await readFile(join(dir, "journal", "messages.jsonl"), "utf8").catch(() => "");
  expect(journal).not.toContain(`"senderId":"${STRANGER}"`);
});

it("a block by someone without a code, or the bot removed from a group, changes nothing and sends nothing", async () => {
  send(STRANGER, "hi");
  await waitFor(() => texts().some((t) => CODE.test(t)), undefined, "the pairing code");
  const sentBefore = fake.sent.length;
  fake.userBlocksBot({ id: 99, first_name: "someone else" });
  fake.pushUpdate({
    my_chat_member: {
      chat: { id: -100123, type: "supergroup", title: "Team" },
      from: { id: STRANGER, is_bot: false, first_name: `user ${STRANGER}` },
      date: Math.floor(Date.now() / 1000),
      old_chat_member: { user: fake.bot, status: "member" },
      new_chat_member: { user: fake.bot, status: "left" },
    },
  });
  await ownerSays("ping", "re: ping");
  expect(pending().map((p) => p.senderId)).toEqual([String(STRANGER)]);
  expect(fake.sent.slice(sentBefore).map((m) => String(m.chatId))).toEqual([String(OWNER)]);
});
