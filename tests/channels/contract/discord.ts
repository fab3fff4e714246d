/**
 * The contract suite's Discord driver: the real DiscordChannel (real discord.js)
 * built from a config by the adapter's factory, against FakeDiscord, whose /openai/v1/audio/transcriptions answers VOICE_TRANSCRIPT.
 */
import { DiscordChannel, discordOptionsFrom } from "../../../src/channels/discord/adapter.js";
import { ConfigSchema } from "../../../src/config/schema.js";
import { EPHEMERAL, FakeDiscord, type FakeUser } from "../../fakes/discord-server.js";
import { captureLog } from "../../helpers/log.js";
import { VOICE_TRANSCRIPT, type PlatformDriver } from "./driver.js";

const MESSAGES = /^\/channels\/\d+\/messages$/;
const MESSAGE = /^\/channels\/\d+\/messages\/\d+$/;

export const discordDriver: PlatformDriver = {
  name: "discord",
  typing: "repeats",
  messageLimit: 2000,
  async create({ workspace }) {
    const fake = await FakeDiscord.start();
    fake.transcript = VOICE_TRANSCRIPT;
    // Before the adapter connects: announced with its channels at IDENTIFY.
    const general = fake.addGuild({ name: "home", channels: ["general"] }).channels[0]!;
    const alice = fake.addUser("alice");
    const bob = fake.addUser("bob");
    const people = new Map<string, FakeUser>([
      [alice.id, alice],
      [bob.id, bob],
    ]);
    const config = ConfigSchema.parse({
      providers: { whisper: { apiBase: fake.transcriptionBaseURL, apiKey: "k" } },
      transcription: { provider: "whisper" },
      channels: { discord: { enabled: true, token: fake.token, apiUrl: fake.apiUrl } },
    });
    const channel = new DiscordChannel({
      ...discordOptionsFrom({ config, workspace, log: captureLog().log }),
      typingIntervalMs: 30,
      // Every rate limit becomes a ChannelError with retryAfterMs, so the outbox's retry is what is tested.
      maxRateLimitWaitMs: 0,
    });
    const chatId = fake.dmChannel(alice).id;
    return {
      channel,
      allowedSender: alice.id,
      strangerSender: bob.id,
      chatId,
      userSends(from, text, file) {
        const author = people.get(from);
        if (!author) throw new Error(`no fake user ${from}`);
        const channelId = fake.dmChannel(author).id;
        if (file === "voice") fake.voiceMessage({ channelId, author, content: text });
        else
          fake.userMessage({
            channelId,
            author,
            content: text,
            attachments:
              file === "document" ? [fake.addAttachment("notes.txt", "buy milk", "text/plain")] : [],
          });
        return Promise.resolve();
      },
      userSendsInGroup(from, text) {
        const author = people.get(from);
        if (!author) throw new Error(`no fake user ${from}`);
        fake.userMessage({
          channelId: general.id,
          author,
          content: `<@${fake.bot.id}> ${text}`,
          mentions: [fake.bot],
        });
        return Promise.resolve();
      },
      groupTexts: () => fake.sent.filter((m) => m.channelId === general.id).map((m) => m.content),
      downloads: () => fake.requests.filter((r) => r.path.startsWith("/attachments/")).length,
      typingSignals: () =>
        fake.requests.filter((r) => r.method === "POST" && r.path.endsWith("/typing")).length,
      typingActive: () => channel.isTyping(chatId),
      texts: () => fake.sent.map((m) => m.content),
      buttons() {
        const latest = fake.botMessages().at(-1);
        return latest ? fake.buttonsOf(latest.id) : [];
      },
      async press(from, label) {
        const user = people.get(from);
        const latest = fake.botMessages().at(-1);
        if (!user || !latest) throw new Error(`no fake user ${from}, or no message of the bot`);
        const { id } = fake.pressButton({ user, messageId: latest.id, label });
        const [answer] = await fake.waitFor(
          () => {
            const callbacks = fake.callbacksOf(id);
            return callbacks.length > 0 && callbacks;
          },
          undefined,
          "the press acknowledged",
        );
        // Type 4 with flags 64: a message only the presser sees; anything else shows them nothing.
        const { type, data } = answer as { type: number; data?: { content?: string; flags?: number } };
        return type === 4 && data?.flags === EPHEMERAL ? (data.content ?? "") : "";
      },
      currentTexts: () => fake.botMessages().map((m) => m.content),
      previews: () => fake.shown.map((s) => s.content),
      failNextEdit() {
        // The user deleted the message being edited.
        fake.failNext({
          method: "PATCH",
          path: MESSAGE,
          status: 404,
          code: 10008,
          message: "Unknown Message",
        });
      },
      earlyRetries: () => fake.earlyRetries.length,
      failNextSend(kind) {
        if (kind === "permanent") {
          // The user closed their DMs to the bot.
          fake.failNext({
            method: "POST",
            path: MESSAGES,
            status: 403,
            code: 50007,
            message: "Cannot send messages to this user",
          });
        } else {
          fake.rateLimitNext({ method: "POST", path: MESSAGES, retryAfter: 1 });
        }
      },
      close: () => fake.close(),
    };
  },
};
