/** The contract driver for Telegram: the real adapter (real grammy) against FakeTelegram. */
import { createTelegramChannel } from "../../../src/channels/telegram/adapter.js";
import { ConfigSchema } from "../../../src/config/schema.js";
import { FakeTelegram, visibleText } from "../../fakes/telegram-server.js";
import { captureLog } from "../../helpers/log.js";
import { VOICE_TRANSCRIPT, type PlatformDriver } from "./driver.js";

const ALLOWED = "42";
const STRANGER = "7";
const GROUP = { id: -1001234, type: "supergroup", title: "Team" };

export const telegramDriver: PlatformDriver = {
  name: "telegram",
  typing: "repeats",
  messageLimit: 4096,
  async create({ workspace }) {
    const fake = await FakeTelegram.start();
    fake.transcript = VOICE_TRANSCRIPT;
    const config = ConfigSchema.parse({
      providers: { whisper: { apiBase: fake.transcriptionBaseURL, apiKey: "k" } },
      transcription: { provider: "whisper", model: "whisper-1" },
      channels: {
        telegram: {
          enabled: true,
          token: fake.token,
          apiRoot: fake.apiRoot,
          allowFrom: [ALLOWED],
          pollTimeout: 1,
        },
      },
    });
    const channel = await createTelegramChannel(
      { config, workspace, log: captureLog().log },
      { typingIntervalMs: 50, stopTimeoutMs: 2000, retryBaseMs: 50, retryMaxMs: 200 },
    );
    return {
      channel,
      allowedSender: ALLOWED,
      strangerSender: STRANGER,
      chatId: ALLOWED,
      async userSends(from, text, file) {
        const attached =
          file === "voice"
            ? { voice: { ...fake.addFile(Buffer.from("OggS voice")), duration: 1, mime_type: "audio/ogg" } }
            : file === "document"
              ? { document: { ...fake.addFile("a document"), file_name: "notes.txt" } }
              : {};
        fake.userMessage({
          from: { id: Number(from), first_name: `user ${from}` },
          ...(file ? (text ? { caption: text } : {}) : { text }),
          ...attached,
        });
        const updateId = fake.lastUpdateId;
        await fake.waitFor(() => fake.deliveredUpdateId >= updateId, 5000, "the update handed to the bot");
      },
      async userSendsInGroup(from, text) {
        fake.userMessage({
          from: { id: Number(from), first_name: `user ${from}` },
          chat: GROUP,
          text: `@palaver_test_bot ${text}`,
        });
        const updateId = fake.lastUpdateId;
        await fake.waitFor(() => fake.deliveredUpdateId >= updateId, 5000, "the update handed to the bot");
      },
      groupTexts: () =>
        fake.sent.filter((m) => String(m.chatId) === String(GROUP.id)).flatMap((m) => m.text ?? []),
      downloads: () => fake.fileDownloads,
      typingSignals: () => fake.callsTo("sendChatAction").length,
      typingActive: () => channel.isTyping(ALLOWED),
      texts: () => fake.sent.flatMap((m) => m.text ?? m.caption ?? []),
      buttons: () => (fake.sent.at(-1)?.buttons ?? []).flat().map((b) => b.text),
      async press(from, label) {
        const latest = fake.sent.at(-1);
        const button = latest?.buttons.flat().find((b) => b.text === label);
        if (!latest || button?.callback_data === undefined)
          throw new Error(`no button "${label}" under the bot's latest message`);
        const queryId = fake.pressButton(
          { id: Number(from), first_name: `user ${from}` },
          latest.messageId,
          button.callback_data,
        );
        const answer = await fake.waitFor(
          () => fake.callbackAnswers.find((a) => a.queryId === queryId),
          5000,
          "the press answered",
        );
        return answer.text ?? "";
      },
      currentTexts: () => fake.sent.map(visibleText),
      previews: () => [...fake.shown],
      failNextEdit: () =>
        // The next edit or draft update, whichever comes first, fails as for a message deleted meanwhile.
        fake.failNextEdit({ code: 400, description: "Bad Request: message to edit not found" }),
      earlyRetries: () => fake.earlyRetries.length,
      failNextSend(kind) {
        if (kind === "permanent")
          fake.failNext("sendMessage", { code: 403, description: "Forbidden: bot was blocked by the user" });
        else
          fake.failNext("sendMessage", {
            code: 429,
            description: "Too Many Requests: retry after 1",
            retryAfter: 1,
          });
      },
      close: () => fake.close(),
    };
  },
};
