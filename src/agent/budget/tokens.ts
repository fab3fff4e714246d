/**
 * Token counts of prompt messages, for the context budget.
 *
 * OpenAI's model families are counted with their own encoding (gpt-tokenizer,
 * pure JS: o200k_base or cl100k_base); other models with chars/4, which is
 * close enough for a budget that keeps a safety margin (and the overflow
 * recovery catches the rest). The encoding is imported by load(), which the
 * budget calls only for prompts that come near the limit: its tables are large
 * to load and to keep, which a process whose chats stay short should not pay
 * for.
 *
 * Counts are cached per text (the same tool result is counted once, however
 * many calls and turns it is sent in), not per message object: a WeakMap keyed
 * by every message of every session cost ~6 µs a new entry at 100 chats at
 * once, more than adding up a message's cached texts again.
 */
import type { ChatMessage, ToolDefinition } from "../../llm/types.js";
import { BoundedMap } from "../../util/bounded-map.js";

type EncodingName = "o200k_base" | "cl100k_base";
type CountText = (text: string) => number;

/** Role, separators and name of one message (OpenAI's cookbook counts 3 or 4). */
export const MESSAGE_OVERHEAD_TOKENS = 4;
/** An inline image: OpenAI charges 85–1105 tokens depending on its size; this assumes a large one. */
export const IMAGE_TOKENS = 1000;
/** How many distinct texts keep their count (strings the sessions already hold in memory). */
const TEXT_CACHE_SIZE = 8192;
/** Texts shorter than this are counted each time: as cheap as looking them up. */
const UNCACHED_TEXT_CHARS = 8;

/** The encoding of a model name (with or without a provider/ prefix), or null: counted as chars/4. */
export function encodingFor(model: string): EncodingName | null {
  const name = (model.toLowerCase().split("/").pop() ?? "").trim();
  if (/^(gpt-4o|chatgpt-4o|gpt-4\.1|gpt-4\.5|gpt-5|gpt-oss|o[1-9](-|$))/.test(name)) return "o200k_base";
  if (/^(gpt-4|gpt-3\.5)/.test(name)) return "cl100k_base";
  return null;
}

/** chars/4, rounded up: the estimate for models whose tokenizer palaver does not have. */
export function estimateTokens(text: string): number {
  return Math.ceil(text.length / 4);
}

const loading = new Map<EncodingName, Promise<CountText>>();

/** The encoding's counter, imported once per process. Special-token text counts as plain text. */
function loadEncoding(name: EncodingName): Promise<CountText> {
  let pending = loading.get(name);
  if (!pending) {
    const mod =
      name === "o200k_base"
        ? import("gpt-tokenizer/encoding/o200k_base")
        : import("gpt-tokenizer/encoding/cl100k_base");
    const plain = { disallowedSpecial: new Set<string>() };
    pending = mod.then((m) => (text: string) => m.countTokens(text, plain));
    loading.set(name, pending);
  }
  return pending;
}

export class TokenCounter {
  private countText: CountText = estimateTokens;
  private readonly encoding: EncodingName | null;
  private loaded: Promise<void> | undefined;
  private byText = new BoundedMap<string, number>(TEXT_CACHE_SIZE);
  private byTools = new WeakMap<readonly ToolDefinition[], number>();

  constructor(readonly model: string) {
    this.encoding = encodingFor(model);
  }

  /** Whether counts come from the model's own encoding (else chars/4). */
  get precise(): boolean {
    return this.countText !== estimateTokens;
  }

  /** Imports the model's encoding (once); until then counts are chars/4. Never rejects. */
  load(): Promise<void> {
    this.loaded ??= this.encoding
      ? loadEncoding(this.encoding).then(
          (count) => {
            this.countText = count;
            // Counts made with the estimate are dropped.
            this.byText = new BoundedMap<string, number>(TEXT_CACHE_SIZE);
            this.byTools = new WeakMap();
          },
          () => undefined, // a broken install leaves the estimate in place; the budget still works
        )
      : Promise.resolve();
    return this.loaded;
  }

  /** Tokens of a text (cached). */
  text(text: string): number {
    if (text.length < UNCACHED_TEXT_CHARS) return this.countText(text);
    const known = this.byText.get(text);
    if (known !== undefined) return known;
    const n = this.countText(text);
    this.byText.set(text, n);
    return n;
  }

  /** Tokens one message adds to a prompt: overhead, content, tool calls. */
  message(msg: ChatMessage): number {
    let n = MESSAGE_OVERHEAD_TOKENS;
    if (typeof msg.content === "string") n += this.text(msg.content);
    else if (msg.content) {
      for (const part of msg.content) n += part.type === "text" ? this.text(part.text) : IMAGE_TOKENS;
    }
    for (const call of msg.tool_calls ?? []) {
      n += MESSAGE_OVERHEAD_TOKENS + this.text(call.function.name) + this.text(call.function.arguments);
    }
    if (msg.name) n += 1;
    return n;
  }

  /** Tokens of the tool definitions sent with every call (cached per definitions array). */
  tools(definitions: readonly ToolDefinition[] | undefined): number {
    if (!definitions?.length) return 0;
    const known = this.byTools.get(definitions);
    if (known !== undefined) return known;
    const n = this.text(JSON.stringify(definitions));
    this.byTools.set(definitions, n);
    return n;
  }

  /** Tokens of a whole prompt: its messages plus the tool definitions. */
  prompt(messages: readonly ChatMessage[], definitions?: readonly ToolDefinition[]): number {
    let n = this.tools(definitions);
    for (const m of messages) n += this.message(m);
    return n;
  }
}
