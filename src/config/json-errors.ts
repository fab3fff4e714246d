/**
 * Where a config file's JSON is broken, as line and column. V8's messages
 * only sometimes carry a position, so the first syntax error is found here.
 */

/** 1-based line and column of a character offset. */
export function lineColumn(text: string, offset: number): { line: number; column: number } {
  const before = text.slice(0, offset);
  const line = before.split("\n").length;
  const column = offset - (before.lastIndexOf("\n") + 1) + 1;
  return { line, column };
}

/** The offset and reason of the first JSON syntax error, or undefined if the text is valid. */
export function findJsonError(text: string): { offset: number; reason: string } | undefined {
  let i = 0;
  class Stop extends Error {
    constructor(readonly reason: string) {
      super(reason);
    }
  }
  const fail = (reason: string): never => {
    // Running out of text mid-value is what happened, whatever was expected next.
    throw new Stop(
      i >= text.length && !reason.startsWith("unterminated") ? "unexpected end of file" : reason,
    );
  };
  const unexpected = (): never => fail(`unexpected character ${JSON.stringify(text[i])}`);
  const ws = () => {
    while (i < text.length && " \t\n\r".includes(text[i]!)) i++;
    // Comments are the commonest mistake of people used to JSONC or JavaScript: say so by name.
    if (text[i] === "/" && (text[i + 1] === "/" || text[i + 1] === "*")) {
      fail(`JSON has no comments: remove the comment at line ${lineColumn(text, i).line}`);
    }
  };
  const literal = /true|false|null|-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?/y;
  const str = () => {
    i++; // opening quote
    for (;;) {
      if (i >= text.length) fail("unterminated string");
      const c = text[i]!;
      if (c === '"') return void i++;
      if (c === "\\") {
        const e = text[i + 1];
        if (e !== undefined && '"\\/bfnrt'.includes(e)) i += 2;
        else if (e === "u" && /^[0-9a-fA-F]{4}$/.test(text.slice(i + 2, i + 6))) i += 6;
        else fail("invalid escape in string");
      } else if (c.charCodeAt(0) < 0x20) fail("line break or control character inside a string");
      else i++;
    }
  };
  const value = (depth: number): void => {
    if (depth > 512) fail("nested too deeply");
    ws();
    const c = text[i];
    if (c === "{" || c === "[") {
      const close = c === "{" ? "}" : "]";
      i++;
      ws();
      if (text[i] === close) return void i++;
      for (;;) {
        if (c === "{") {
          ws();
          if (text[i] !== '"') fail("expected a property name in double quotes");
          str();
          ws();
          if (text[i] !== ":") fail("expected ':' after the property name");
          i++;
        }
        value(depth + 1);
        ws();
        if (text[i] === ",") {
          i++;
          ws();
          if (text[i] === close) fail(`trailing comma before '${close}'`);
          continue;
        }
        if (text[i] === close) return void i++;
        fail(`expected ',' or '${close}'`);
      }
    }
    if (c === '"') return str();
    literal.lastIndex = i;
    const m = literal.exec(text);
    if (!m) unexpected();
    else i += m[0].length;
  };
  try {
    value(0);
    ws();
    if (i < text.length) fail("unexpected content after the end of the JSON value");
    return undefined;
  } catch (err) {
    if (err instanceof Stop) return { offset: Math.min(i, text.length), reason: err.reason };
    throw err;
  }
}
