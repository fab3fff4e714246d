/** agents.bindings: which named agent a conversation belongs to. Pure: a message in, a name out. */
import type { InboundMessage } from "../../bus/types.js";

export interface AgentBinding {
  match: { channel: string; chatId?: string; threadId?: string; senderId?: string };
  agent: string;
}

/** The agent of the first binding whose every given field matches `msg`; undefined: the default agent. */
export function bindingFor(bindings: readonly AgentBinding[], msg: InboundMessage): string | undefined {
  const thread = msg.threadId;
  return bindings.find(
    ({ match }) =>
      match.channel === msg.channel &&
      (match.chatId === undefined || match.chatId === msg.chatId) &&
      (match.threadId === undefined || match.threadId === thread) &&
      (match.senderId === undefined || match.senderId === msg.senderId),
  )?.agent;
}
