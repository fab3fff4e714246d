/**
 * The chat request body as the bytes sent. Most of them are the same from call to call: the tool
 * definitions (~6 KB with the built-in tools) and the system prompt (several KB, rebuilt only when
 * a workspace file changes). Those are serialized and UTF-8 encoded once and reused, so a call
 * serializes and encodes only its history and parameters: JSON.stringify of the whole body was
 * ~0.16 ms of every call at 100 turns at once (bench/throughput.ts, CPU profile), and encoding the
 * whole text again ~25 µs more (a body with one character beyond Latin-1, such as the runtime
 * context's dash, is encoded from a two-byte string). The bytes parse to the same body; only the
 * order of its top-level keys differs, which no API minds.
 */
import type {
  ChatCompletionCreateParams,
  ChatCompletionMessageParam,
} from "openai/resources/chat/completions";

export class RequestJson {
  /** By the caller's definitions array, which stays the same object (ToolRegistry.definitions()). */
  private readonly toolsJson = new WeakMap<readonly unknown[], Buffer>();
  private system: { content: string; json: Buffer } | undefined;

  /** `tools`: the array body.tools was copied from, the key of its cached JSON. */
  of(body: ChatCompletionCreateParams, tools: readonly unknown[] | undefined): Buffer {
    const { messages, tools: sentTools, ...rest } = body;
    const parts: Buffer[] = [];
    // `rest` always holds the model, so its JSON has at least one key to follow with a comma.
    let text = `${JSON.stringify(rest).slice(0, -1)},"messages":[`;
    for (let i = 0; i < messages.length; i++) {
      if (i) text += ",";
      const cached = this.systemJson(messages[i]!);
      if (cached) {
        parts.push(Buffer.from(text), cached);
        text = "";
      } else text += JSON.stringify(messages[i]);
    }
    text += "]";
    if (sentTools) {
      parts.push(Buffer.from(`${text},"tools":`), this.cachedToolsJson(tools ?? sentTools));
      text = "";
    }
    parts.push(Buffer.from(`${text}}`));
    return Buffer.concat(parts);
  }

  /** The cached JSON of a plain system message; undefined for any other message. */
  private systemJson(message: ChatCompletionMessageParam): Buffer | undefined {
    const { content } = message;
    if (message.role !== "system" || typeof content !== "string" || message.name !== undefined) return;
    if (this.system?.content !== content)
      this.system = { content, json: Buffer.from(JSON.stringify(message)) };
    return this.system.json;
  }

  private cachedToolsJson(tools: readonly unknown[]): Buffer {
    let json = this.toolsJson.get(tools);
    if (json === undefined) {
      json = Buffer.from(JSON.stringify(tools));
      this.toolsJson.set(tools, json);
    }
    return json;
  }
}
