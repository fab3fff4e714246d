/** Markdown → readable terminal text (ANSI when colour is on). Pure. */

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
  if (!color) return bullet.replace(/\*\*(.+?)\*\*/g, "$1").replace(/`([^`]+)`/g, "$1");
  return bullet
    .replace(/\*\*(.+?)\*\*/g, (_m, t: string) => style("1", t))
    .replace(/(^|[^*])\*([^*\s][^*]*)\*/g, (_m, pre: string, t: string) => pre + style("3", t))
    .replace(/`([^`]+)`/g, (_m, t: string) => style("36", t))
    .replace(/\[([^\]]+)\]\((\S+?)\)/g, (_m, t: string, url: string) => `${t} ${style("2", `(${url})`)}`);
}

export function dim(text: string, color: boolean): string {
  return color ? style("2", text) : text;
}
