/** A tiny element builder: the page has no framework, and this keeps its views declarative enough. */

type Attrs = Record<string, string | boolean | undefined>;
type Child = Node | string | null | undefined | false;

/**
 * `h("button", { type: "button", class: "stop" }, "Stop")`. Attributes set to false or undefined
 * are left out, true sets an empty attribute. Strings are text nodes, never HTML.
 */
export function h<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  attrs: Attrs = {},
  ...children: Child[]
): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value === undefined || value === false) continue;
    el.setAttribute(name, value === true ? "" : value);
  }
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child);
  }
  return el;
}

/** The element with this id, which index.html must have: a missing one is a bug in the page. */
export function byId<T extends HTMLElement>(id: string, type: new () => T): T {
  const el = document.getElementById(id);
  if (!(el instanceof type)) throw new Error(`index.html has no <${type.name}> #${id}`);
  return el;
}
