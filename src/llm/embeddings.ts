/**
 * Text → vectors through an OpenAI-compatible `/embeddings` endpoint, for memory search's ranking
 * by meaning (`memory.search.embeddings`). The endpoint is chosen like the chat model's
 * (`resolveProvider`), so `provider` names an entry of `providers` and its apiBase and key are used.
 * The client tries each call once: the caller (recall/vector-filler.ts) decides when to try again.
 */
import type { ClientOptions, OpenAI } from "openai";
import type { Config } from "../config/schema.js";
import { registerSecrets, type Logger } from "../log.js";
import { errorMessage } from "../util/errors.js";
import { openAIClient } from "./openai-sdk.js";
import { resolveProvider, type ResolvedProvider } from "./providers.js";

export interface Embedder {
  /** The model's id: vectors are stored under it, so another model means embedding again. */
  readonly model: string;
  /** One vector per text, in order. */
  embed(texts: readonly string[], signal?: AbortSignal): Promise<number[][]>;
}

const TIMEOUT_MS = 30_000;

/** The endpoint and model of memory.search.embeddings, chosen like the chat model's. Throws ConfigError on a bad provider. */
function resolveEmbeddings(config: Config, wanted: { model: string; provider?: string }): ResolvedProvider {
  return resolveProvider({
    ...config,
    agents: {
      ...config.agents,
      defaults: {
        ...config.agents.defaults,
        ...(wanted.provider ? { provider: wanted.provider } : {}),
        model: wanted.model,
      },
    },
  });
}

/** The model id vectors are stored under (as sent to the endpoint), or undefined when embeddings are off. */
export function embedderModel(config: Config): string | undefined {
  const wanted = config.memory.search.embeddings;
  if (!wanted) return undefined;
  try {
    return resolveEmbeddings(config, wanted).model;
  } catch {
    return wanted.model;
  }
}

/** The embedder the config asks for, or null when memory.search.embeddings is absent. Throws ConfigError on a bad provider. */
function createEmbedder(config: Config): Embedder | null {
  const wanted = config.memory.search.embeddings;
  if (!wanted) return null;
  const resolved = resolveEmbeddings(config, wanted);
  if (resolved.apiKey) registerSecrets([resolved.apiKey]);
  const options: ClientOptions = {
    baseURL: resolved.baseURL,
    // Local servers need no key; the SDK refuses to send none.
    apiKey: resolved.apiKey || "no-key",
    organization: null,
    project: null,
    defaultHeaders: resolved.extraHeaders,
    timeout: TIMEOUT_MS,
    maxRetries: 0,
  };
  let client: Promise<OpenAI> | undefined;
  return {
    model: resolved.model,
    async embed(texts, signal) {
      const result = await (
        await (client ??= openAIClient(options))
      ).embeddings.create({ model: resolved.model, input: [...texts] }, signal ? { signal } : {});
      const byIndex = [...result.data].sort((a, b) => a.index - b.index).map((d) => d.embedding);
      if (byIndex.length !== texts.length)
        throw new Error(`the endpoint returned ${byIndex.length} vectors for ${texts.length} texts`);
      return byIndex;
    },
  };
}

/** The embedder for memory search, or undefined (full text only) with a warning saying why it cannot be made. */
export function embedderFor(config: Config, log: Logger): Embedder | undefined {
  try {
    return createEmbedder(config) ?? undefined;
  } catch (err) {
    log.warn(
      { err },
      `memory.search.embeddings cannot be used (${errorMessage(err)}); memory search ranks by full text (BM25) only`,
    );
    return undefined;
  }
}
