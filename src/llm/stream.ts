/**
 * A streamed chat completion put back together: content and reasoning concatenated, tool calls
 * assembled by their index (id and name arrive first, the arguments in pieces), usage from the
 * last chunk. The result has the shape of a non-streamed completion, so `parseCompletion` reads
 * both the same way. Each chunk is checked on its own; one that is not a chunk fails the stream
 * as an unreadable answer (the caller retries when nothing was shown yet).
 */
import * as z from "zod";
import { LlmError } from "../util/errors.js";
import { ThinkFilter } from "./think-stream.js";
import { WireUsage } from "./wire.js";

const WireChunk = z.object({
  model: z.string().nullish(),
  choices: z
    .array(
      z.object({
        delta: z
          .object({
            content: z.string().nullish(),
            reasoning_content: z.string().nullish(),
            reasoning: z.string().nullish(),
            tool_calls: z
              .array(
                z.object({
                  index: z.number().int().min(0).max(127).optional(),
                  id: z.string().nullish(),
                  function: z
                    .object({ name: z.string().nullish(), arguments: z.string().nullish() })
                    .nullish(),
                }),
              )
              .nullish(),
          })
          .nullish(),
        finish_reason: z.string().nullish(),
      }),
    )
    .nullish(),
  usage: WireUsage.nullish(),
});

interface AssembledCall {
  id: string;
  function: { name: string; arguments: string };
}

/** What `parseCompletion` reads, built from the chunks. */
export interface AssembledCompletion {
  model?: string;
  choices: {
    message: { content: string; reasoning_content: string; tool_calls?: AssembledCall[] };
    finish_reason: string | null;
  }[];
  usage?: z.infer<typeof WireUsage>;
}

export class StreamAssembler {
  private content = "";
  private reasoning = "";
  private readonly calls: AssembledCall[] = [];
  private finishReason: string | null = null;
  private model: string | undefined;
  private usage: AssembledCompletion["usage"];
  private readonly think = new ThinkFilter();
  /** The visible text so far (think blocks removed); "" until the model says something to show. */
  visible = "";

  /** Adds one chunk; returns true when the visible text changed. */
  push(chunk: unknown): boolean {
    const parsed = WireChunk.safeParse(chunk);
    if (!parsed.success) {
      throw new LlmError(
        `the LLM streamed a chunk that is not a chat completion chunk: ${parsed.error.issues[0]?.message ?? "?"}`,
        "invalid_response",
        true,
        { cause: parsed.error },
      );
    }
    const { data } = parsed;
    if (data.model) this.model = data.model;
    if (data.usage) this.usage = data.usage;
    const choice = data.choices?.[0];
    if (!choice) return false;
    if (choice.finish_reason) this.finishReason = choice.finish_reason;
    const delta = choice.delta;
    if (!delta) return false;
    this.reasoning += delta.reasoning_content ?? delta.reasoning ?? "";
    for (const piece of delta.tool_calls ?? []) this.addCallPiece(piece);
    if (!delta.content) return false;
    this.content += delta.content;
    const before = this.visible;
    this.visible = this.think.push(delta.content);
    return this.visible !== before;
  }

  private addCallPiece(piece: {
    index?: number;
    id?: string | null;
    function?: { name?: string | null; arguments?: string | null } | null;
  }): void {
    // Servers that send whole calls leave out the index: each piece is then its own call.
    const index = piece.index ?? this.calls.length;
    const call = (this.calls[index] ??= { id: "", function: { name: "", arguments: "" } });
    if (piece.id) call.id = piece.id;
    call.function.name += piece.function?.name ?? "";
    call.function.arguments += piece.function?.arguments ?? "";
  }

  /**
   * The completion as a non-streamed response would have carried it. A stream that ended with no
   * finish_reason was cut (the SDK ends quietly when the connection closes): it is not an answer.
   */
  result(): AssembledCompletion {
    if (this.finishReason === null) {
      throw new LlmError("the answer stream ended before the model finished", "network", true);
    }
    // A hole in the indexes (a server that skipped one) leaves no empty call behind.
    const calls = this.calls.filter((c) => c !== undefined && c.function.name !== "");
    return {
      ...(this.model ? { model: this.model } : {}),
      choices: [
        {
          message: {
            content: this.content,
            reasoning_content: this.reasoning,
            ...(calls.length ? { tool_calls: calls } : {}),
          },
          finish_reason: this.finishReason,
        },
      ],
      ...(this.usage ? { usage: this.usage } : {}),
    };
  }
}
