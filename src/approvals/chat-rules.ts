/** PLACEHOLDER (the h-policy branch replaces this file): "Always allow this in this chat" rules in the state folder. */
import type { ChatRule, ChatRuleStore } from "./types.js";

export class FileChatRules implements ChatRuleStore {
  private readonly rules: ChatRule[] = [];
  /** `path`: the rules file in the state folder (paths.ts gives it). */
  constructor(readonly path: string) {}
  list(): ChatRule[] {
    return [...this.rules];
  }
  forChat(channel: string, chatId: string): ChatRule[] {
    return this.rules.filter((r) => r.channel === channel && r.chatId === chatId);
  }
  add(rule: Omit<ChatRule, "id" | "addedAt">): ChatRule {
    const added = { ...rule, id: String(this.rules.length + 1), addedAt: Date.now() };
    this.rules.push(added);
    return added;
  }
  revoke(id: string): boolean {
    const i = this.rules.findIndex((r) => r.id === id);
    if (i >= 0) this.rules.splice(i, 1);
    return i >= 0;
  }
}
