/**
 * finish_reason "length": the model hit its output token limit mid-answer.
 * Ignored, a cut-off answer reads as complete and cut-off tool arguments read
 * as a model that cannot write JSON; these say what really happened.
 */
import type { ChatResponse, ToolCall } from "./types.js";

function cutOff(response: Pick<ChatResponse, "finishReason">): boolean {
  return response.finishReason === "length";
}

/**
 * Tool calls whose arguments broke off at the limit get a note that makes the
 * model retry with smaller output, instead of "not valid JSON" (which invites
 * sending the same long arguments again).
 */
export function explainCutOffArguments(toolCalls: ToolCall[], finishReason: string): ToolCall[] {
  if (!cutOff({ finishReason })) return toolCalls;
  return toolCalls.map((call) =>
    call.argumentsError
      ? {
          ...call,
          argumentsError:
            `your output reached the token limit while writing the arguments of ${call.name}, so they were cut off. ` +
            "Retry with smaller output: split long content over several calls (for example write a file in parts)",
        }
      : call,
  );
}

/** The text for the user, marked when it was cut off at the limit (and said so when nothing came). */
export function answerForUser(response: Pick<ChatResponse, "content" | "finishReason">): string | null {
  if (!cutOff(response)) return response.content;
  const why = "the model reached its output token limit (agents.defaults.maxTokens)";
  if (!response.content?.trim()) {
    return `(No answer: ${why} before writing one. Ask for something shorter, or raise the limit.)`;
  }
  return `${response.content}\n\n(Cut off: ${why}. Ask me to continue.)`;
}
