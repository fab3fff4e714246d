import { mkdir, readFile } from "node:fs/promises";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import {
  CappedText,
  capHeadTail,
  commandEnv,
  createExecTool,
  findDestructive,
  type ExecToolOptions,
} from "../../../src/agent/tools/exec.js";
import { ConfigError } from "../../../src/util/errors.js";
import { TempDirs, makeContext } from "./helpers.js";

/** Alive and not a zombie (a zombie is dead, only not yet reaped by its new parent). */
async function isAlive(pid: number): Promise<boolean> {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  try {
    const stat = await readFile(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2)[0] !== "Z";
  } catch {
    return false;
  }
}

async function waitForDeath(pid: number, ms = 3000): Promise<boolean> {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    if (!(await isAlive(pid))) return true;
    await sleep(50);
  }
  return !(await isAlive(pid));
}

async function waitForFile(path: string, ms = 3000): Promise<string> {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    const text = await readFile(path, "utf8").catch(() => "");
    if (text.trim()) return text.trim();
    await sleep(20);
  }
  throw new Error(`${path} never appeared`);
}

describe("exec tool", () => {
  const temps = new TempDirs();
  const pids: number[] = [];
  let ws: string;

  function tool(over: Partial<ExecToolOptions> = {}) {
    return createExecTool({
      workspace: ws,
      restrictToWorkspace: true,
      timeoutSeconds: 10,
      maxOutputChars: 10_000,
      pathAppend: "",
      denyPatterns: [],
      killGraceMs: 500,
      ...over,
    });
  }
  async function run(command: string, over: Partial<ExecToolOptions> = {}, working_dir?: string) {
    return tool(over).execute({ command, working_dir }, makeContext({ workspace: ws }).ctx);
  }

  beforeEach(async () => {
    ws = await temps.make();
  });
  afterEach(async () => {
    // Belt and braces: never leave a sleeping process behind, even when a test fails.
    for (const pid of pids.splice(0)) {
      try {
        process.kill(pid, "SIGKILL");
      } catch {
        /* already gone */
      }
    }
    await temps.cleanup();
  });

  it("returns stdout, labelled stderr and the exit code, in the workspace by default", async () => {
    const out = await run("pwd; echo oops >&2; exit 3");
    expect(out).toBe(`${ws}\nSTDERR:\noops\n\nExit code: 3`);
  });

  it("reports exit code 0 and no output", async () => {
    expect(await run("true")).toBe("(no output)\n\nExit code: 0");
  });

  it("gets stdin from /dev/null", async () => {
    expect(await run("cat; echo done")).toBe("done\n\nExit code: 0");
  });

  it("runs in working_dir inside the workspace and refuses one outside", async () => {
    await mkdir(join(ws, "sub"));
    expect(await run("pwd", {}, "sub")).toBe(`${join(ws, "sub")}\n\nExit code: 0`);
    await expect(run("pwd", {}, "/")).rejects.toThrow(/access denied: \/ is outside the workspace/);
    await expect(run("pwd", {}, "..")).rejects.toThrow(/outside the workspace/);
    expect(await run("pwd", { restrictToWorkspace: false }, "/")).toBe("/\n\nExit code: 0");
    await expect(run("pwd", {}, "missing")).rejects.toThrow(/not an existing directory/);
  });

  it("caps long output keeping head and tail", async () => {
    const out = await run("seq 1 20000", { maxOutputChars: 1000 });
    expect(out.startsWith("1\n2\n3\n")).toBe(true);
    expect(out).toMatch(/\[output truncated: \d+ of \d+ characters omitted from the middle\]/);
    expect(out).toMatch(/19999\n20000\n\nExit code: 0$/);
    expect(out.length).toBeLessThan(1200);
  });

  it("refuses destructive commands before running them", async () => {
    const marker = join(ws, "ran");
    await expect(run(`touch ${marker}; rm -rf /`)).rejects.toThrow(/refused by the safety guard/);
    await expect(readFile(marker)).rejects.toThrow();
    await expect(run(":(){ :|:& };:")).rejects.toThrow(/fork bomb/);
  });

  it("refuses configured deny patterns and rejects invalid ones", async () => {
    await expect(run("git push --force", { denyPatterns: ["git\\s+push\\s+--force"] })).rejects.toThrow(
      /configured deny pattern/,
    );
    expect(() => tool({ denyPatterns: ["(unclosed"] })).toThrow(ConfigError);
  });

  it("appends pathAppend to PATH and hides palaver's own variables", async () => {
    process.env.PALAVER_TEST_SECRET = "s3cret";
    try {
      const out = await run('echo "$PATH"; echo "[$PALAVER_TEST_SECRET]"', { pathAppend: "/opt/extra/bin" });
      expect(out).toMatch(/:\/opt\/extra\/bin\n\[\]\n/);
    } finally {
      delete process.env.PALAVER_TEST_SECRET;
    }
  });

  it("on timeout kills the whole process tree and says so", async () => {
    const started = Date.now();
    const out = await run("sleep 30 & echo $! > pid; wait", { timeoutSeconds: 1 });
    const pid = Number(await readFile(join(ws, "pid"), "utf8"));
    pids.push(pid);
    expect(out).toMatch(/did not finish within 1 second and was killed/);
    expect(Date.now() - started).toBeLessThan(5000);
    expect(await waitForDeath(pid)).toBe(true);
  });

  it("kills a grandchild that ignores SIGTERM (SIGKILL after the grace)", async () => {
    const script = "sh -c 'trap \"\" TERM; sleep 30 & echo $! > pid; wait' ; echo never";
    const out = await run(script, { timeoutSeconds: 1, killGraceMs: 300 });
    const pid = Number(await readFile(join(ws, "pid"), "utf8"));
    pids.push(pid);
    expect(out).toMatch(/was killed/);
    expect(out).not.toContain("never");
    expect(await waitForDeath(pid)).toBe(true);
  });

  it("stops the process tree when the turn is aborted", async () => {
    const { ctx, controller } = makeContext({ workspace: ws });
    const pending = tool().execute({ command: "sleep 30 & echo $! > pid; wait" }, ctx);
    const pid = Number(await waitForFile(join(ws, "pid")));
    pids.push(pid);
    expect(await isAlive(pid)).toBe(true);
    controller.abort();
    const out = await pending;
    expect(out).toMatch(/stopped/);
    expect(await waitForDeath(pid)).toBe(true);
  });
});

describe("destructive command guard", () => {
  it.each([
    "rm -rf /",
    "rm -rf /*",
    "rm -fr ~",
    "rm -rf ~/",
    "sudo rm -r -f /",
    'rm -rf "$HOME"',
    "rm --recursive --force /usr",
    "cd /tmp && rm -Rf /etc/",
    "rm -rf --no-preserve-root /",
    "mkfs.ext4 /dev/sda1",
    "dd if=/dev/zero of=/dev/sda bs=1M",
    "echo x > /dev/sda",
    "shutdown -h now",
    "sudo reboot",
    "echo hi; poweroff",
    "systemctl reboot",
    ":(){ :|:& };:",
    "bomb(){ bomb|bomb& };bomb",
    "chmod -R 777 /",
    "chown -R nobody /",
    "kill -9 -1",
  ])("refuses %s", (cmd) => {
    expect(findDestructive(cmd)).not.toBeNull();
  });

  it.each([
    "rm -rf build/",
    "rm -rf ./node_modules",
    "rm -rf /tmp/palaver-test-dir",
    "rm file.txt",
    "rm -f /etc/something.conf",
    "dd if=/dev/zero of=/dev/null count=1",
    "dd if=in.img of=out.img",
    "echo shutdown is a word",
    "chmod -R 755 ./scripts",
    "ls -la /",
    "grep -r reboot docs/",
  ])("allows %s", (cmd) => {
    expect(findDestructive(cmd)).toBeNull();
  });
});

describe("exec helpers", () => {
  it("CappedText keeps head and tail and counts the rest", () => {
    const t = new CappedText(3);
    for (const chunk of ["abc", "def", "ghi", "jk"]) t.push(chunk);
    expect(t.length).toBe(11);
    expect(t.toString()).toBe("abc\n[... 5 characters omitted ...]\nijk");
    const small = new CappedText(10);
    small.push("hello");
    expect(small.toString()).toBe("hello");
  });

  it("capHeadTail leaves short text alone", () => {
    expect(capHeadTail("short", 10)).toBe("short");
    const capped = capHeadTail("a".repeat(50) + "b".repeat(50), 20);
    expect(capped.startsWith("a".repeat(12))).toBe(true);
    expect(capped.endsWith("b".repeat(8))).toBe(true);
    expect(capped).toContain("80 of 100 characters omitted");
  });

  it("commandEnv drops PALAVER_ variables and appends to PATH", () => {
    const env = commandEnv({ PATH: "/bin", PALAVER_PROVIDERS__X__API_KEY: "k", HOME: "/h" }, "/extra");
    expect(env).toEqual({ PATH: "/bin:/extra", HOME: "/h" });
    expect(commandEnv({}, "/extra").PATH).toBe("/extra");
  });
});
