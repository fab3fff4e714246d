/** The contract suite's Slack: the real adapter (@slack/bolt: its Socket Mode receiver and Web API client) against the fake Slack. */
import { pino } from "pino";
import { createSlackChannel } from "../../../src/channels/slack/adapter.js";
import { SLACK_MESSAGE_LIMIT } from "../../../src/channels/slack/format.js";
import { ConfigSchema } from "../../../src/config/schema.js";
import { BOT_USER_ID, channelMessage, dmEvent, FakeSlack } from "../../fakes/slack-server.js";
import { waitFor } from "../../helpers/wait.js";
import { FAST, slackSection } from "../slack/helpers.js";
import { VOICE_TRANSCRIPT, type PlatformDriver } from "./driver.js";

const ALLOWED = "U1";
const RECEIPT = "eyes";
/** The channel group messages arrive in. */
const GROUP = "C1";

/** Each person's direct message with the bot: U1 → D1. */
const dmOf = (user: string) => `D${user.slice(1)}`;

export const slackDriver: PlatformDriver = {
  name: "slack",
  typing: "once",
  // Where the adapter splits a reply (Slack itself takes 40,000 characters but folds long ones).
  messageLimit: SLACK_MESSAGE_LIMIT,
  async create({ workspace }) {
    const fake = await FakeSlack.start();
    fake.transcript = VOICE_TRANSCRIPT;
    const config = ConfigSchema.parse({
      providers: { whisper: { apiBase: fake.transcriptionBaseURL, apiKey: "k" } },
      transcription: { provider: "whisper" },
      channels: {
        slack: slackSection(fake, { allowFrom: [ALLOWED], reactEmoji: RECEIPT }),
      },
    });
    /** The bot's latest message as Slack holds it now. */
    const latest = () => fake.botMessages().at(-1);
    const channel = await createSlackChannel({ config, workspace, log: pino({ level: "silent" }) }, FAST);
    return {
      channel,
      allowedSender: ALLOWED,
      strangerSender: "U2",
      chatId: dmOf(ALLOWED),
      async userSends(from, text, file) {
        const files =
          file === "voice"
            ? [
                fake.addFile("audio_message.m4a", Buffer.from("fake m4a"), "audio/mp4", {
                  subtype: "slack_audio",
                }),
              ]
            : file === "document"
              ? [fake.addFile("notes.txt", "remember the milk")]
              : undefined;
        await fake.pushEvent(
          dmEvent(text, {
            user: from,
            channel: dmOf(from),
            ...(files ? { subtype: "file_share", files } : {}),
          }),
        );
      },
      async userSendsInGroup(from, text) {
        await fake.pushEvent(channelMessage(`<@${BOT_USER_ID}> ${text}`, { user: from, channel: GROUP }));
      },
      groupTexts: () =>
        fake
          .delivered()
          .filter((m) => m.channel === GROUP)
          .map((m) => m.text),
      downloads: () => fake.downloads.length,
      typingSignals: () => fake.callsTo("reactions.add").length,
      typingActive: () => [...fake.reactions.values()].some((names) => names.has(RECEIPT)),
      texts: () => fake.delivered().map((m) => m.text),
      buttons: () => fake.buttonsOf(latest()?.message),
      async press(from, label) {
        const last = latest();
        if (!last) throw new Error("the bot has posted nothing to press");
        const seen = fake.ephemerals.length;
        await fake.pressButton(from, last.channel, last.message.ts, label);
        // Acknowledged first, then the notice goes to the presser as an ephemeral message.
        await waitFor(
          () => fake.ephemerals.slice(seen).some((e) => e.user === from),
          undefined,
          "the ephemeral notice",
        );
        return fake.ephemerals.slice(seen).find((e) => e.user === from)!.text;
      },
      currentTexts: () => fake.botMessages().map((m) => fake.shownText(m.message)),
      previews: () => fake.shown.map((s) => s.text),
      // The message was deleted (or is past the workspace's edit window): Slack says so for good.
      failNextEdit: () => fake.failNext("chat.update", "message_not_found"),
      earlyRetries: () => fake.earlyRetries.length,
      failNextSend(kind) {
        if (kind === "permanent") fake.failNext("chat.postMessage", "channel_not_found");
        else fake.rateLimit("chat.postMessage", 1);
      },
      async close() {
        await fake.waitForDisconnect().catch(() => undefined);
        await fake.close();
      },
    };
  },
};
