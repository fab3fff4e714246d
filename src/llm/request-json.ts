/**
 * The chat request body as the JSON text sent. Most of its bytes are the same from call to call:
 * the tool definitions (~6 KB with the built-in tools) and the system prompt (several KB, rebuilt
 * only when a workspace file changes). Their JSON is made once and reused, so a call serializes
 * only its history and parameters; JSON.stringify of the whole body was ~0.16 ms of every call at
 * 100 turns at once (bench/throughput.ts, CPU profile). The text parses to the same body; only
 * the order of its top-level keys differs, which no API minds.
 */
import type {
  ChatCompletionCreateParams,
  ChatCompletionMessageParam,
} from "openai/resources/chat/completions";

export class RequestJson {
  /** By the caller's definitions array, which stays the same object (ToolRegistry.definitions()). */
  private readonly toolsJson = new WeakMap<readonly unknown[], string>();
  private system: { content: string; json: string } | undefined;

  /** `tools`: the array body.tools was copied from, the key of its cached JSON. */
  of(body: ChatCompletionCreateParams, tools: readonly unknown[] | undefined): string {
    const { messages, tools: sentTools, ...rest } = body;
    // `rest` always holds the model, so its JSON has at least one key to follow with a comma.
    let json = `${JSON.stringify(rest).slice(0, -1)},"messages":[`;
    for (let i = 0; i < messages.length; i++) json += (i ? "," : "") + this.messageJson(messages[i]!);
    json += "]";
    if (sentTools) json += `,"tools":${this.cachedToolsJson(tools ?? sentTools)}`;
    return `${json}}`;
  }

  private messageJson(message: ChatCompletionMessageParam): string {
    const { content } = message;
    const plainSystem =
      message.role === "system" && typeof content === "string" && message.name === undefined;
    if (!plainSystem) return JSON.stringify(message);
    if (this.system?.content !== content) this.system = { content, json: JSON.stringify(message) };
    return this.system.json;
  }

  private cachedToolsJson(tools: readonly unknown[]): string {
    let json = this.toolsJson.get(tools);
    if (json === undefined) {
      json = JSON.stringify(tools);
      this.toolsJson.set(tools, json);
    }
    return json;
  }
}
