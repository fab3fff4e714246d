/**
 * A client of the `openai` package, which is imported when the first LLM call needs one rather than
 * when palaver starts: it is the largest package a Telegram gateway loads (some 150 modules), and
 * nothing before the channels are up calls a model. Node imports it once per process.
 */
import type { ClientOptions, OpenAI } from "openai";

export async function openAIClient(options: ClientOptions): Promise<OpenAI> {
  const { OpenAI } = await import("openai");
  return new OpenAI(options);
}
