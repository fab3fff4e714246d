/**
 * The conversations list: links to `#c=<id>` (so Back and Forward move between chats and a
 * reload stays on one), the current one marked for assistive technology with aria-current.
 */
import type { ConversationSummary } from "../../src/channels/web/protocol.js";
import { h } from "./dom.js";
import { formatAge } from "./format.js";

export function renderConversations(
  list: HTMLElement,
  conversations: ConversationSummary[],
  currentId: string | undefined,
): void {
  list.replaceChildren(
    ...conversations.map((c) =>
      h(
        "li",
        {},
        h(
          "a",
          {
            href: `#c=${c.id}`,
            class: c.busy ? "busy" : undefined,
            "aria-current": c.id === currentId ? "page" : undefined,
          },
          h("span", { class: "title" }, c.title || "New chat"),
          h("span", { class: "age" }, c.busy ? "answering…" : formatAge(c.updatedAt)),
        ),
      ),
    ),
  );
}
