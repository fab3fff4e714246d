/**
 * Which agent runs a conversation's turns, and `/agent`. A conversation's agent is, in order:
 * the one an owner switched it to (`/agent <name>`, kept in the session's metadata), the first
 * binding that matches (agents.bindings), else the default agent. A named agent's turn runs with
 * its instructions after the workspace's bootstrap files, its model and its tools. The vision slot
 * replaces the model of a turn that carries images the main model cannot see.
 */
import { originOf, replyPlaceOf, type InboundMessage } from "../../bus/types.js";
import type { ChatMessage, Provider } from "../../llm/types.js";
import { withModel } from "../../llm/with-model.js";
import type { ToolRegistry } from "../tools/registry.js";
import type { AgentDefinition } from "./definition.js";
import type { NamedAgents } from "./named-agents.js";
import { bindingFor, type AgentBinding } from "./routing.js";

/** Session metadata key: the agent an owner switched the conversation to. */
export const SESSION_AGENT = "agent";
/** `/agent default`: the built-in agent, whatever the bindings say. */
const DEFAULT = "default";

export interface TurnAgent {
  /** The agent's name; undefined for the default agent. */
  name?: string;
  /** Replacements for the default agent's; absent: the default's. */
  provider?: Provider;
  tools?: ToolRegistry;
  maxIterations?: number;
  /** Appended to the system prompt (the agent's instructions, the agents it can call). */
  prompt: string;
}

export interface ConversationAgentsOptions {
  agents: NamedAgents;
  /** The default agent's provider (the vision slot swaps its model) and tools. */
  provider: Provider;
  tools: ToolRegistry;
  bindings: () => readonly AgentBinding[];
  allowSwitch: () => boolean;
  isOwner: (msg: InboundMessage) => boolean;
  /** A model for turns with images (agents.defaults.models.vision when supportsVision is false). */
  visionModel?: string;
}

export class ConversationAgents {
  constructor(private readonly opts: ConversationAgentsOptions) {}

  /** What this turn runs with. `metadata`: the session's; `hasImages`: the user's message carries images. */
  async forTurn(
    msg: InboundMessage,
    metadata: Record<string, unknown>,
    hasImages: boolean,
  ): Promise<TurnAgent> {
    const { agents } = await this.opts.agents.directory.catalog();
    const name = this.chosenName(msg, metadata);
    const def = name ? agents.get(name) : undefined;
    const prepared = def ? await this.opts.agents.prepare(def, "conversation") : undefined;
    const tools = prepared?.tools ?? this.opts.tools;
    const base = prepared?.provider ?? this.opts.provider;
    const provider = hasImages && this.opts.visionModel ? withModel(base, this.opts.visionModel) : base;
    const sections = [
      ...(prepared ? [`# Agent: ${prepared.name}\n\n${prepared.instructions}`] : []),
      agentsSection([...agents.values()], tools, prepared?.name),
    ].filter((s) => s !== "");
    return {
      ...(prepared ? { name: prepared.name, tools, maxIterations: prepared.maxIterations } : {}),
      ...(provider !== this.opts.provider ? { provider } : {}),
      prompt: sections.join("\n\n"),
    };
  }

  /** The agent's name for /status ("default" when none is chosen or the chosen one is gone). */
  async nameFor(msg: InboundMessage, metadata: Record<string, unknown>): Promise<string> {
    const name = this.chosenName(msg, metadata);
    if (!name) return DEFAULT;
    return (await this.opts.agents.directory.get(name)) ? name : `${DEFAULT} (${name} is missing or broken)`;
  }

  /**
   * `/agent` lists the agents; `/agent <name>` switches the conversation (owners, when
   * agents.allowSwitch is true). `save`: metadata changed and must be written.
   */
  async command(
    msg: InboundMessage,
    args: string,
    metadata: Record<string, unknown>,
  ): Promise<{ text: string; save: boolean }> {
    const { agents, problems } = await this.opts.agents.directory.catalog();
    const current = await this.nameFor(msg, metadata);
    const wanted = args.trim();
    if (wanted === "") {
      const lines = [...agents.values()].map((a) => `${a.name} — ${a.description}`);
      return {
        text: [
          `This conversation's agent: ${current}`,
          ...(lines.length
            ? ["Agents:", ...lines]
            : ["No named agents (add them as agents/<name>.md in the workspace)."]),
          ...(problems.length
            ? [`${problems.length} agent file(s) have problems: palaver agents check`]
            : []),
          ...(this.opts.allowSwitch()
            ? ["Switch with /agent <name> (owners); /agent default goes back."]
            : []),
        ].join("\n"),
        save: false,
      };
    }
    if (!this.opts.allowSwitch()) {
      return { text: "Switching agents is turned off (agents.allowSwitch in the config).", save: false };
    }
    if (!this.opts.isOwner(msg)) {
      return {
        text: "Only the owner can switch agents (someone in allowFrom or admins of this channel).",
        save: false,
      };
    }
    if (wanted !== DEFAULT && !agents.has(wanted)) {
      return {
        text: `There is no agent named "${wanted}". Agents: ${[...agents.keys()].join(", ") || "(none)"}.`,
        save: false,
      };
    }
    metadata[SESSION_AGENT] = wanted;
    return {
      text: `This conversation now talks to ${wanted === DEFAULT ? "the default agent" : wanted}.`,
      save: true,
    };
  }

  private chosenName(msg: InboundMessage, metadata: Record<string, unknown>): string | undefined {
    const switched = metadata[SESSION_AGENT];
    if (typeof switched === "string" && switched !== "") return switched === DEFAULT ? undefined : switched;
    // Background work (a subagent's report) runs with the agent of the chat it came from.
    const origin = originOf(msg);
    return bindingFor(this.opts.bindings(), {
      ...msg,
      channel: origin.channel,
      chatId: origin.chatId,
      ...replyPlaceOf(origin),
      metadata: origin.metadata,
    });
  }
}

/** The agents a turn can hand work to, for its system prompt; empty when it has no way to. */
function agentsSection(
  agents: readonly AgentDefinition[],
  tools: ToolRegistry,
  self: string | undefined,
): string {
  const ways = ["delegate", "spawn"].filter((t) => tools.has(t));
  const others = agents.filter((a) => a.name !== self);
  if (ways.length === 0 || others.length === 0) return "";
  return [
    "# Named agents",
    "",
    "You can hand a task to one of these agents: delegate({agent, task}) waits for its answer (several " +
      "delegate calls in one reply run in parallel); spawn({task, agent}) runs it in the background.",
    ...others.map((a) => `- ${a.name}: ${a.description}`),
  ].join("\n");
}

/** The prompt with `text` appended to its system message (after the workspace's bootstrap files). */
export function withSystemText(prompt: ChatMessage[], text: string): ChatMessage[] {
  const [system, ...rest] = prompt;
  if (!text || system?.role !== "system" || typeof system.content !== "string") return prompt;
  return [{ ...system, content: `${system.content}\n\n---\n\n${text}` }, ...rest];
}

/** Whether a message carries images (inlined as image parts by the context builder). */
export function hasImages(message: ChatMessage | undefined): boolean {
  return Array.isArray(message?.content) && message.content.some((p) => p.type === "image_url");
}
