/**
 * Voice notes and audio files → text, on every platform, through an OpenAI-compatible /audio/transcriptions
 * endpoint (OpenAI, Groq, a local whisper server …), chosen by the top-level
 * `transcription` config: `provider` names an entry of `providers` (its
 * apiBase/apiKey are used), `model` the speech model.
 */
import { createReadStream } from "node:fs";
import { basename } from "node:path";
import type { default as OpenAI, toFile as ToFile } from "openai";
import type { Config } from "../config/schema.js";
import { resolveProvider } from "../llm/providers.js";
import type { Logger } from "../log.js";
import { ChannelError, errorMessage } from "../util/errors.js";

export interface Transcriber {
  transcribe(path: string, signal?: AbortSignal): Promise<string>;
}

const TIMEOUT_MS = 120_000;

/** A transcriber for the configured provider, or null when transcription is off. Throws ConfigError on a bad provider. */
export function createTranscriber(config: Config): Transcriber | null {
  const { provider, model } = config.transcription;
  if (!provider.trim()) return null;
  // resolveProvider knows every provider's default base URL and says which key is missing.
  const resolved = resolveProvider({
    ...config,
    agents: { ...config.agents, defaults: { ...config.agents.defaults, provider: provider.trim(), model } },
  });
  // The SDK is loaded with the first voice note, not with the channel.
  let client: Promise<{ openai: OpenAI; toFile: typeof ToFile }> | undefined;
  const sdkClient = () =>
    (client ??= import("openai").then(({ default: OpenAI, toFile }) => ({
      openai: new OpenAI({
        baseURL: resolved.baseURL,
        apiKey: resolved.apiKey || "not-needed",
        defaultHeaders: resolved.extraHeaders,
        timeout: TIMEOUT_MS,
        maxRetries: 1,
      }),
      toFile,
    })));
  return {
    async transcribe(path, signal) {
      try {
        const { openai, toFile } = await sdkClient();
        const file = await toFile(createReadStream(path), basename(path));
        const result = await openai.audio.transcriptions.create({ file, model: resolved.model }, { signal });
        return result.text.trim();
      } catch (err) {
        throw new ChannelError(`transcription failed: ${errorMessage(err)}`, { cause: err });
      }
    },
  };
}

/** The transcriber for a channel being built: null (with a warning saying why) when it cannot be made. */
export function transcriberFor(config: Config, log: Logger): Transcriber | null {
  try {
    return createTranscriber(config);
  } catch (err) {
    log.warn({ err }, `voice messages will not be transcribed: ${errorMessage(err)}`);
    return null;
  }
}
