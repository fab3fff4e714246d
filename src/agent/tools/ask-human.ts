/**
 * ask_human: the model asks the person it works for a question mid-task and waits for the answer
 * (a button for each option where the platform has buttons, or any typed reply). The answer does
 * not start a new turn: the loop hands it to the question desk (approvals/questions.ts) instead.
 */
import * as z from "zod";
import type { HumanDesk } from "../questions.js";
import { defineTool, type Tool } from "./types.js";

const parameters = z.object({
  question: z.string().min(1).max(1000).describe("The question, complete on its own."),
  options: z
    .array(z.string().min(1).max(60))
    .max(5)
    .optional()
    .describe("Up to 5 short answers to offer as buttons; the user may still type anything."),
});

export function createAskHumanTool(desk: HumanDesk, timeoutText: string): Tool<typeof parameters> {
  return defineTool({
    name: "ask_human",
    description:
      "Ask the user a question and wait for the answer, when you cannot go on without it " +
      "(a choice only they can make, missing information). Do not use it for small talk or to " +
      "confirm what they already asked for.",
    parameters,
    // Changes nothing; a turn replayed after a restart asks again (the old prompt has expired).
    readOnly: true,
    async execute({ question, options = [] }, ctx) {
      const answer = await desk.ask({
        kind: "ask_human",
        channel: ctx.channel,
        chatId: ctx.chatId,
        ...(ctx.threadId !== undefined ? { threadId: ctx.threadId } : {}),
        ...(ctx.metadata ? { metadata: ctx.metadata } : {}),
        ...(ctx.sender ? { sender: ctx.sender } : {}),
        text: `❓ ${question}`,
        summary: question,
        choices: options.map((label, i) => ({ id: `o${i + 1}`, label })),
        signal: ctx.signal,
      });
      if ("nobody" in answer)
        return (
          "Error: no one can answer questions in this chat (work in the background, or no person at " +
          "the terminal). Make a reasonable assumption and say which one you made."
        );
      if ("timedOut" in answer) return `No answer within ${timeoutText}.`;
      return `The user answered: ${"choiceId" in answer ? answer.choiceId : answer.text}`;
    },
  });
}
