/**
 * palaver on a pseudo-terminal, as a person's terminal runs it (util-linux `script`): the built
 * CLI, its output and errors collected as one screen. `size` gives the terminal rows and columns
 * (a pseudo-terminal without a window has none), so tests can count rows.
 */
import { spawn, type ChildProcessWithoutNullStreams } from "node:child_process";

export interface TerminalRun {
  child: ChildProcessWithoutNullStreams;
  /** Everything drawn so far. */
  readonly screen: string;
  exited: Promise<number | null>;
}

export function onTerminal(
  args: readonly string[],
  opts: { cwd: string; home: string; size?: { cols: number; rows: number } },
): TerminalRun {
  const quote = (word: string) => `'${word.replaceAll("'", `'\\''`)}'`;
  const command = [process.execPath, ...args].map(quote).join(" ");
  const script = opts.size ? `stty cols ${opts.size.cols} rows ${opts.size.rows}; exec ${command}` : command;
  const child = spawn("script", ["-qec", script, "/dev/null"], {
    cwd: opts.cwd,
    env: { PATH: process.env.PATH, NO_COLOR: "1", HOME: opts.home, TERM: "xterm" },
  });
  let screen = "";
  child.stdout.on("data", (d: Buffer) => (screen += d.toString()));
  child.stderr.on("data", (d: Buffer) => (screen += d.toString()));
  const exited = new Promise<number | null>((resolve) => child.on("close", resolve));
  return {
    child,
    get screen() {
      return screen;
    },
    exited,
  };
}
