import { mkdir, readFile } from "node:fs/promises";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import {
  CappedText,
  capHeadTail,
  createExecTool,
  type ExecToolOptions,
} from "../../../../src/agent/tools/exec/exec.js";
import { findDestructive, type GuardContext } from "../../../../src/workspace/exec-guard.js";
import { findOutsidePath } from "../../../../src/agent/tools/exec/paths.js";
import { describeSandbox, ExecSandbox } from "../../../../src/agent/tools/exec/sandbox.js";
import { ConfigError } from "../../../../src/util/errors.js";
import { TempDirs, makeContext, writeUnconfinedBwrap } from "../helpers.js";
import { MIN_WAIT_MS, waitFor } from "../../../helpers/wait.js";

const asRoot = process.getuid?.() === 0;
if (!asRoot) console.warn("exec tests of a bwrap that keeps root skipped: they need root (as CI runs)");

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

/** Waits (the suite's patience: only a hang ends it) until `pid` is gone. */
async function waitForDeath(pid: number): Promise<boolean> {
  await waitFor(async () => !(await isAlive(pid)), MIN_WAIT_MS, `process ${pid} to end`);
  return true;
}

async function waitForFile(path: string): Promise<string> {
  let text = "";
  await waitFor(
    async () => (text = (await readFile(path, "utf8").catch(() => "")).trim()) !== "",
    MIN_WAIT_MS,
    `${path} to be written`,
  );
  return text;
}

/**
 * The tool without the sandbox (tools.exec.sandbox "off", or "auto" where
 * bwrap is missing): process handling, the guard, the path refusals of
 * restrictToWorkspace and the environment. sandbox.test.ts covers bwrap.
 */
describe("exec tool (not sandboxed)", () => {
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
      sandbox: new ExecSandbox({ mode: "off", network: true }),
      configPath: join(ws, "..", "state", "config.json"),
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

  it("gives commands only the allow-listed environment, pathAppend and tools.exec.env", async () => {
    const secrets = {
      PALAVER_TEST_SECRET: "s3cret-palaver",
      OPENAI_API_KEY: "sk-test-openai-secret",
      BRAVE_API_KEY: "brave-test-secret",
      LC_TIME: "C",
    };
    Object.assign(process.env, secrets);
    try {
      const out = await run("env", {
        pathAppend: "/opt/extra/bin",
        env: { GIT_AUTHOR_NAME: "Ada" },
      });
      const names = out
        .split("\n")
        .filter((l) => /^[A-Za-z_]\w*=/.test(l))
        .map((l) => l.slice(0, l.indexOf("=")));
      // sh itself adds PWD (and some shells OLDPWD, SHLVL, _); nothing else comes from palaver.
      const shellOwn = ["PWD", "OLDPWD", "SHLVL", "_"];
      expect(names.filter((n) => !shellOwn.includes(n)).sort()).toEqual(
        [
          "GIT_AUTHOR_NAME",
          "HOME",
          "LC_TIME",
          "PATH",
          ...["LANG", "TERM", "TZ"].filter((n) => process.env[n]),
        ].sort(),
      );
      expect(out).toMatch(/^PATH=.*:\/opt\/extra\/bin$/m);
      expect(out).toContain(`HOME=${ws}\n`);
      expect(out).toContain("GIT_AUTHOR_NAME=Ada");
      for (const secret of Object.values(secrets).filter((v) => v !== "C")) expect(out).not.toContain(secret);
    } finally {
      for (const name of Object.keys(secrets)) delete process.env[name];
    }
  });

  it("expands ${VAR} in tools.exec.env from palaver's environment", async () => {
    process.env.EXEC_TEST_TOKEN = "tok-for-git";
    try {
      expect(await run('echo "$GH_TOKEN"', { env: { GH_TOKEN: "${EXEC_TEST_TOKEN}" } })).toBe(
        "tok-for-git\n\nExit code: 0",
      );
    } finally {
      delete process.env.EXEC_TEST_TOKEN;
    }
  });

  it("with restrictToWorkspace, refuses commands naming paths outside the workspace, `..` or `~`", async () => {
    await mkdir(join(ws, "sub"));
    for (const command of [
      "cat ../config.json ../.env",
      "cat /etc/passwd",
      "cd /etc && head -1 passwd",
      "echo x > ../file",
      "cat ~/.palaver/config.json",
      "ls sub/../..",
      "tr '\\0' '\\n' </proc/$PPID/environ",
    ]) {
      await expect(run(command), command).rejects.toThrow(
        /command refused: it names .*outside the workspace/,
      );
    }
    await expect(run("cat /etc/passwd")).rejects.toThrow(/not sandboxed \(tools.exec.sandbox is "off"\)/);
    await expect(readFile(join(ws, "..", "file"))).rejects.toThrow();
    // Inside the workspace, the usual devices and programs named by their full path are fine.
    expect(await run(`echo hi > ${join(ws, "sub", "f")} 2>/dev/null; /bin/cat sub/f`)).toBe(
      "hi\n\nExit code: 0",
    );
    expect(await run("curl --version >/dev/null 2>&1 || true; echo https://example.com/a/b")).toBe(
      "https://example.com/a/b\n\nExit code: 0",
    );
    // Unrestricted, the same commands run (today's behaviour, documented as such).
    expect(await run("cat ../missing-file 2>&1; echo done", { restrictToWorkspace: false })).toMatch(/done/);
  });

  it("names the sandbox and how to install it when bwrap is missing (auto)", async () => {
    const sandbox = new ExecSandbox({ mode: "auto", network: true, bwrapPath: "/nonexistent/bwrap" });
    await expect(run("cat /etc/passwd", { sandbox })).rejects.toThrow(
      /not sandboxed \(bwrap \(bubblewrap\) is not installed\).*sudo apt-get install bubblewrap/,
    );
    expect(await run("echo still works", { sandbox })).toBe("still works\n\nExit code: 0");
  });

  it("falls back when the bwrap test run fails (auto), naming the failure", async () => {
    const sandbox = new ExecSandbox({ mode: "auto", network: true, bwrapPath: "/bin/false" });
    expect(await sandbox.state()).toEqual({
      sandboxed: false,
      mode: "auto",
      reason: "the bwrap test run exited with 1",
    });
    expect(await run("echo unconfined", { sandbox })).toBe("unconfined\n\nExit code: 0");
  });

  describe.skipIf(!asRoot)("a bwrap that starts commands but leaves them root", () => {
    it("is not a sandbox (auto): the reason and that commands run as root are said", async () => {
      const bwrapPath = await writeUnconfinedBwrap(await temps.make("palaver-fake-bwrap-"));
      const sandbox = new ExecSandbox({ mode: "auto", network: true, bwrapPath });
      const state = await sandbox.state();
      expect(state).toEqual({
        sandboxed: false,
        mode: "auto",
        reason: "commands in the bwrap test run still ran as root (uid 0)",
      });
      expect(describeSandbox(state)).toBe(
        "NOT sandboxed (commands in the bwrap test run still ran as root (uid 0)): commands run as root; " +
          'to confine them, see "Shell commands" in the README',
      );
      // Unconfined, so restrictToWorkspace's path check applies as without bwrap.
      await expect(run("cat /etc/passwd", { sandbox })).rejects.toThrow(
        /exec is not sandboxed \(commands in/,
      );
    });

    it('refuses to run anything with sandbox "require" (ConfigError, as for a missing bwrap)', async () => {
      const bwrapPath = await writeUnconfinedBwrap(await temps.make("palaver-fake-bwrap-"));
      const sandbox = new ExecSandbox({ mode: "require", network: true, bwrapPath });
      const refused = await sandbox.state().catch((err: unknown) => err);
      expect(refused).toBeInstanceOf(ConfigError);
      expect((refused as ConfigError).problems).toEqual([
        "tools.exec.sandbox: commands in the bwrap test run still ran as root (uid 0); " +
          'see "Shell commands" in the README, or set it to "auto" or "off"',
      ]);
      await expect(run(`touch ${join(ws, "ran")}`, { sandbox })).rejects.toThrow(/exec is unavailable/);
      await expect(readFile(join(ws, "ran"))).rejects.toThrow(/ENOENT/);
    });
  });

  it('with sandbox "require" and no working bwrap, runs nothing and says why', async () => {
    const sandbox = new ExecSandbox({ mode: "require", network: true, bwrapPath: "/nonexistent/bwrap" });
    await expect(run(`touch ${join(ws, "ran")}`, { sandbox })).rejects.toThrow(
      /exec is unavailable: tools.exec.sandbox: .*sudo apt-get install bubblewrap/,
    );
    await expect(readFile(join(ws, "ran"))).rejects.toThrow();
  });

  it("on timeout kills the whole process tree and says so", async () => {
    const out = await run("sleep 30 & echo $! > pid; wait", { timeoutSeconds: 1 });
    const pid = Number(await readFile(join(ws, "pid"), "utf8"));
    pids.push(pid);
    expect(out).toMatch(/did not finish within 1 second and was killed with its process group/);
    // Without the sandbox a setsid child is out of reach, and the reply says so rather than "everything".
    expect(out).toMatch(/setsid, may still run/);
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

describe("destructive command guard (a seatbelt)", () => {
  const ctx: GuardContext = {
    home: "/home/ann",
    workspace: "/home/ann/.palaver/workspace",
    stateDir: "/home/ann/.palaver",
    cwd: "/home/ann/.palaver/workspace",
  };

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
    // The bypasses of issue 11: wrappers, the state folder, `..`, find, full paths.
    "rm -rf ~/.palaver",
    "rm -rf /home/ann/.palaver/",
    "rm -rf ../",
    "rm -rf ..",
    "find ~ -delete",
    "find / -name '*.log' -delete",
    "find . -delete",
    "find ~/.palaver -exec rm -rf {} +",
    "nice -n 5 rm -rf /",
    "nice -5 rm -rf /",
    "timeout 5 rm -rf /",
    "timeout -s KILL 5 rm -rf /",
    "sudo -u root rm -rf /",
    "doas -u root rm -rf /",
    "ionice -c 3 rm -rf ~",
    "env FOO=1 rm -rf ~",
    "env -u HOME rm -rf /",
    "command rm -rf /",
    "nohup rm -rf / &",
    "stdbuf -o L rm -rf /",
    "sudo -u root nice -n 5 timeout 5 rm -rf /",
    "/bin/rm -rf /",
    "/sbin/reboot",
    "sudo /sbin/shutdown now",
    "init 0",
    // The workspace root itself, however it is named.
    "rm -rf /home/ann/.palaver/workspace",
    "rm -rf *",
    "rm -rf ./*",
    "cd .. && rm -rf workspace",
    "cd ~ && rm -rf *",
  ])("refuses %s", (cmd) => {
    expect(findDestructive(cmd, ctx)).not.toBeNull();
  });

  it.each([
    "rm -rf build/",
    "rm -rf ./node_modules",
    "rm -rf /tmp/palaver-test-dir",
    "rm file.txt",
    "rm -f /etc/something.conf",
    "rm -rf ~/.cache/pip",
    "dd if=/dev/zero of=/dev/null count=1",
    "dd if=in.img of=out.img",
    "echo shutdown is a word",
    "echo rm -rf / is dangerous",
    "chmod -R 755 ./scripts",
    "chmod -R u+w .",
    "ls -la /",
    "grep -r reboot docs/",
    "find . -name '*.pyc' -delete",
    "find build -delete",
    "find ~ -name notes.md",
    "nice -n 5 make",
    "timeout 5 rm -rf build",
  ])("allows %s", (cmd) => {
    expect(findDestructive(cmd, ctx)).toBeNull();
  });

  it("says what a relative target resolves to", () => {
    expect(findDestructive("rm -rf ../", ctx)).toBe("recursive rm of ../ (/home/ann/.palaver)");
  });
});

describe("paths outside the workspace (no sandbox)", () => {
  const ws = "/srv/ws";
  it.each([
    ["cat /etc/passwd", "/etc/passwd"],
    ["cat ../config.json", "a `..` path segment"],
    ["cat ~/.ssh/id_rsa", "~ (the home folder)"],
    ["cat ~root/x", "~root (the home folder)"],
    ["ls --dir=/etc", "/etc"],
    ["echo x >/tmp/y", "/tmp/y"],
    ["echo /*", "/*"],
    ["cat /srv/ws/../secret", "a `..` path segment"],
    ["cat /srv/wsx/a", "/srv/wsx/a"],
  ])("refuses %s", (cmd, what) => {
    expect(findOutsidePath(cmd, ws)).toBe(what);
  });

  it.each([
    "cat notes.md",
    "cat /srv/ws/notes.md",
    "ls 2>/dev/null",
    "/usr/bin/env python3 x.py",
    "curl -s https://example.com/a/b",
    "git log main..HEAD",
    "echo a...b",
    "echo $HOME/x",
  ])("allows %s", (cmd) => {
    expect(findOutsidePath(cmd, ws)).toBeNull();
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
});
