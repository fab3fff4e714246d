/**
 * Reasoning models served through OpenAI-compatible APIs (DeepSeek-R1, QwQ,
 * Qwen3 on ollama/vLLM ...) often put their reasoning inline as
 * `<think>…</think>`. The user must not see it; we keep it as `thinking`.
 */

export interface ThinkSplit {
  /** The content without reasoning blocks (trimmed when something was removed). */
  text: string;
  /** The reasoning blocks' text, joined by blank lines; "" when there was none. */
  thinking: string;
}

const BLOCK = /<think>([\s\S]*?)<\/think>/gi;
const OPEN = /^\s*<think>/i;
const CLOSE = /<\/think>/i;

export function stripThink(content: string): ThinkSplit {
  if (!/<\/?think>/i.test(content)) return { text: content, thinking: "" };
  const thoughts: string[] = [];
  let text = content;

  // Chat templates that open <think> in the prompt make the model emit only
  // "reasoning…</think>answer": a close tag with no open tag before it.
  const close = CLOSE.exec(text);
  const firstOpen = text.search(/<think>/i);
  if (close && (firstOpen === -1 || firstOpen > close.index)) {
    thoughts.push(text.slice(0, close.index));
    text = text.slice(close.index + close[0].length);
  }

  text = text.replace(BLOCK, (_m, inner: string) => {
    thoughts.push(inner);
    return "";
  });

  // A leading block that never closed (the model ran out of tokens while thinking).
  if (OPEN.test(text)) {
    thoughts.push(text.replace(OPEN, ""));
    text = "";
  }

  const thinking = thoughts
    .map((t) => t.trim())
    .filter((t) => t.length > 0)
    .join("\n\n");
  return { text: text.trim(), thinking };
}
