/**
 * A Slack reply shown while the model writes it (channels/live-preview.ts decides when): the first
 * text with chat.postMessage, the growing text with chat.update, and the final, in place, as the
 * very mrkdwn parts a reply sent without streaming gets (format.ts). The adapter supplies the two
 * Web API writes; this decides what text they carry.
 *
 * Slack's native streaming (chat.startStream/appendStream/stopStream) is not used: it works only in
 * threads of apps with the assistant features, while post-then-update works in every chat.
 */
import { ChannelError } from "../../util/errors.js";
import type { PreviewSurface } from "../types.js";
import { escapeMrkdwn, formatSlackMessage, SLACK_MESSAGE_LIMIT } from "./format.js";
import { CHANNEL_NAME } from "./mapping.js";

/**
 * chat.update is Tier 3 (about 50 a minute per workspace): one update per reply every 1.5 s leaves
 * room for a second reply streaming at once; beyond that Slack's 429 paces us (Retry-After).
 */
export const SLACK_PREVIEW_INTERVAL_MS = 1500;

/** The Web API writes a preview needs, each failing with the adapter's ChannelError (errors.ts). */
interface SlackPreviewWrites {
  /** chat.postMessage in the reply's chat (and thread); resolves with the message's ts. */
  post(text: string): Promise<string | undefined>;
  /** chat.update of the message `ts` with this text. */
  update(ts: string, text: string): Promise<void>;
  /** Called once, when the first text of the reply is on screen (the receipt reaction ends then). */
  visible(): void;
}

/**
 * What a preview message says. The model's text so far is plain text: its `&`, `<` and `>` escaped,
 * so that half a link or a `<!channel>` never turns into Slack markup (a mention would notify).
 * Formatted texts come from `finalParts` and are mrkdwn already. Escaping makes a part longer, but
 * parts are cut at SLACK_MESSAGE_LIMIT (3,900), far below the 40,000 characters Slack refuses.
 */
function previewText(text: string, formatted: boolean): string {
  return formatted ? text : escapeMrkdwn(text);
}

/** The preview surface of one reply. */
export function slackPreviewSurface(writes: SlackPreviewWrites): PreviewSurface {
  let shown = false;
  return {
    maxChars: SLACK_MESSAGE_LIMIT,
    intervalMs: SLACK_PREVIEW_INTERVAL_MS,
    async post(text, formatted) {
      const ts = await writes.post(previewText(text, formatted));
      if (!ts) {
        throw new ChannelError("Slack chat.postMessage answered without the message's ts", {
          platform: CHANNEL_NAME,
          method: "chat.postMessage",
          permanent: true,
        });
      }
      if (!shown) {
        shown = true;
        writes.visible();
      }
      return ts;
    },
    // Slack has no "not modified" error: the same text again simply succeeds.
    edit: (ts, text, formatted) => writes.update(ts, previewText(text, formatted)),
    finalParts: (content) => formatSlackMessage(content),
  };
}
