/**
 * The texts of the runner's loop rules: what the model is told when a turn reaches its tool-step
 * cap, and when its answer was cut off at the output token limit. Pure, so the runner reads as
 * the loop and the wording lives in one place.
 */
import type { ChatMessage } from "../llm/types.js";

/** Sent (not saved) before the final, tool-less call of a turn that reached its step cap. */
export function finalAnswerRequest(maxIterations: number): ChatMessage {
  return {
    role: "user",
    content:
      `[You have used all ${maxIterations} tool steps of this turn; no more tools can run.] ` +
      "Answer the user now from what you have gathered so far: say what you found, what is still " +
      "open, and how they could continue.",
  };
}

/** The fallback when even the final call writes nothing. */
export function stoppedText(maxIterations: number, toolsUsed: readonly string[]): string {
  return (
    `I stopped after ${maxIterations} tool steps without finishing this request. ` +
    `Here is where I got to: ${toolsUsed.length} tool calls (${[...new Set(toolsUsed)].join(", ")}). ` +
    `You can ask me to continue, or break the task into smaller steps.`
  );
}

/** Sent (not saved) after an answer cut off at the output token limit, so the model goes on. */
export const CONTINUE_REQUEST: ChatMessage = {
  role: "user",
  content:
    "[Your answer was cut off at the output token limit.] Continue exactly where it stopped, " +
    "without repeating anything and without any preamble.",
};
