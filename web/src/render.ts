/**
 * A model's markdown as safe DOM: marked renders it, DOMPurify sanitizes the result, and the
 * page never uses the HTML in any other way. Defence in depth, because the text is the model's and
 * the model reads web pages:
 *  - raw HTML in the markdown is shown as text (escaped before DOMPurify even sees it);
 *  - images become links, so an answer loads nothing by itself (no tracking pixel, no request to a
 *    local service);
 *  - links keep only http(s) and mailto targets and open in a new tab without an opener or referrer;
 *  - DOMPurify then removes whatever else could run or load.
 */
import DOMPurify from "dompurify";
import { Marked } from "marked";
import { h } from "./dom.js";

const ESCAPES: Record<string, string> = {
  "&": "&amp;",
  "<": "&lt;",
  ">": "&gt;",
  '"': "&quot;",
  "'": "&#39;",
};

function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => ESCAPES[c] ?? c);
}

const marked = new Marked({
  gfm: true,
  // Chat answers break lines with single newlines and expect them kept.
  breaks: true,
  renderer: {
    html: ({ text }) => escapeHtml(text),
    image: ({ href, text }) => `<a href="${escapeHtml(href)}">${escapeHtml(text || href)}</a>`,
  },
});

const SAFE_LINK = /^(https?:|mailto:)/i;

DOMPurify.addHook("afterSanitizeAttributes", (node) => {
  if (node.tagName !== "A") return;
  const href = node.getAttribute("href") ?? "";
  if (!SAFE_LINK.test(href.trim())) {
    node.removeAttribute("href");
    return;
  }
  node.setAttribute("target", "_blank");
  node.setAttribute("rel", "noopener noreferrer");
});

const PURIFY = {
  RETURN_DOM_FRAGMENT: true as const,
  FORBID_TAGS: ["style", "img", "svg", "math", "form", "button", "iframe", "video", "audio", "picture"],
  FORBID_ATTR: ["style", "srcset"],
  ALLOW_DATA_ATTR: false,
};

/** Markdown → a sanitized fragment with a copy button on each code block. */
export function renderMarkdown(markdown: string): DocumentFragment {
  const html = marked.parse(markdown, { async: false });
  const fragment = DOMPurify.sanitize(html, PURIFY);
  for (const pre of Array.from(fragment.querySelectorAll("pre"))) addCopyButton(pre);
  return fragment;
}

function addCopyButton(pre: HTMLPreElement): void {
  const button = h("button", { type: "button", class: "copy", "aria-label": "Copy code" }, "Copy");
  const block = h("div", { class: "code" });
  pre.replaceWith(block);
  block.append(button, pre);
}

/** The click handler for every copy button, installed once on the transcript. */
export function handleCopyClick(event: Event): void {
  const target = event.target;
  if (!(target instanceof HTMLButtonElement) || !target.classList.contains("copy")) return;
  const code = target.parentElement?.querySelector("pre")?.textContent ?? "";
  void copyText(code).then(
    () => flash(target, "Copied"),
    () => flash(target, "Copy failed"),
  );
}

async function copyText(text: string): Promise<void> {
  // The Clipboard API needs a secure context; 127.0.0.1 is one, a LAN address over http is not.
  if (navigator.clipboard && window.isSecureContext) return navigator.clipboard.writeText(text);
  const area = h("textarea", { readonly: true, class: "offscreen" });
  area.value = text;
  document.body.append(area);
  area.select();
  const ok = document.execCommand("copy");
  area.remove();
  if (!ok) throw new Error("copy refused");
}

function flash(button: HTMLButtonElement, label: string): void {
  button.textContent = label;
  setTimeout(() => (button.textContent = "Copy"), 1500);
}
