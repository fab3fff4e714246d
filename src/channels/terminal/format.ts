/** Markdown → readable terminal text (ANSI when colour is on). Pure. */
import { MAX_FORMATTED_LINE, replaceCodeSpans } from "../text.js";

const ESC = "\u001b[";
const style = (code: string, text: string) => `${ESC}${code}m${text}${ESC}0m`;

export interface TerminalFormatOptions {
  color: boolean;
}

export function renderMarkdown(markdown: string, { color }: TerminalFormatOptions): string {
  const out: string[] = [];
  let inFence = false;
  for (const line of markdown.split("\n")) {
    if (/^\s*```/.test(line)) {
      inFence = !inFence;
      if (!color) out.push(line);
      continue;
    }
    if (inFence) {
      out.push(color ? style("36", `  ${line}`) : line);
      continue;
    }
    out.push(renderLine(line, color));
  }
  return out.join("\n");
}

function renderLine(line: string, color: boolean): string {
  const heading = /^(#{1,6})\s+(.*)$/.exec(line);
  if (heading) return color ? style("1;4", heading[2]!) : heading[2]!.toUpperCase();
  const bullet = line.replace(/^(\s*)[-*+]\s+/, "$1• ");
  // Long lines stay as written: the emphasis regexes are quadratic in the line length.
  if (bullet.length > MAX_FORMATTED_LINE) return bullet;
  if (!color) return replaceCodeSpans(bullet.replace(/\*\*([^*]+)\*\*/g, "$1"), (t) => t);
  return replaceCodeSpans(
    bullet
      .replace(/\*\*([^*]+)\*\*/g, (_m, t: string) => style("1", t))
      .replace(/(^|[^*])\*([^*\s][^*]*)\*/g, (_m, pre: string, t: string) => pre + style("3", t))
      .replace(
        /\[([^[\]]+)\]\(([^()\s]+)\)/g,
        (_m, t: string, url: string) => `${t} ${style("2", `(${url})`)}`,
      ),
    (t) => style("36", t),
  );
}

export function dim(text: string, color: boolean): string {
  return color ? style("2", text) : text;
}
