/**
 * exec inside bubblewrap, for real: what a command can read, write, see of the
 * environment and of the daemon, and that nothing it starts outlives it.
 * Skipped, with the reason printed, where bwrap is missing or cannot create
 * namespaces; in CI that fails instead (.ci/run installs it).
 */
import { readdir, readFile, mkdir, stat, writeFile } from "node:fs/promises";
import { createServer, type Server } from "node:net";
import type { AddressInfo } from "node:net";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { createExecTool, type ExecToolOptions } from "../../../../src/agent/tools/exec/exec.js";
import { bwrapArgs, ExecSandbox } from "../../../../src/agent/tools/exec/sandbox.js";
import { ROOT } from "../../../helpers/cli.js";
import { requireOrSkip } from "../../../helpers/requires.js";
import { waitFor } from "../../../helpers/wait.js";
import { TempDirs, makeContext } from "../helpers.js";

const probe = await new ExecSandbox({ mode: "auto", network: true }).state();
const noSandbox = requireOrSkip(probe.sandboxed ? "" : `the exec sandbox tests need bwrap: ${probe.reason}`);

const SECRETS = {
  OPENAI_API_KEY: "sk-sandbox-test-openai",
  PALAVER_CHANNELS__TELEGRAM__TOKEN: "123:sandbox-test-telegram",
};
const CONFIG_SECRET = "config-file-secret-4711";
const DOTENV_SECRET = "dotenv-secret-0815";

/** Processes whose command line is exactly `argv` (read from the host's /proc). */
async function processesRunning(argv: string[]): Promise<number[]> {
  const want = `${argv.join("\0")}\0`;
  const found: number[] = [];
  for (const entry of await readdir("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    const cmdline = await readFile(`/proc/${entry}/cmdline`, "utf8").catch(() => "");
    if (cmdline === want) found.push(Number(entry));
  }
  return found;
}

it("the systemd unit lets bwrap create every namespace the sandbox asks for", () => {
  const unit = readFileSync(join(ROOT, "systemd", "palaver.service"), "utf8");
  const allowed = /^RestrictNamespaces=(.*)$/m.exec(unit)?.[1]?.split(/\s+/) ?? [];
  const args = bwrapArgs({ workspace: "/ws", cwd: "/ws", network: false, hidden: [] });
  // bwrap always makes a mount namespace; the others are one --unshare-<name> each.
  const asked = ["mnt", ...args.flatMap((a) => /^--unshare-(\w+)$/.exec(a)?.[1] ?? [])];
  expect(asked).toEqual(expect.arrayContaining(["user", "pid", "ipc", "uts", "net"]));
  for (const name of asked) expect(allowed, `RestrictNamespaces= lacks ${name}`).toContain(name);
});

describe.skipIf(noSandbox)("exec in the bubblewrap sandbox", () => {
  const temps = new TempDirs();
  let root: string;
  let state: string;
  let ws: string;
  let configPath: string;

  function tool(over: Partial<ExecToolOptions> = {}) {
    return createExecTool({
      workspace: ws,
      restrictToWorkspace: true,
      timeoutSeconds: 30,
      maxOutputChars: 100_000,
      pathAppend: "",
      denyPatterns: [],
      killGraceMs: 500,
      sandbox: new ExecSandbox({ mode: "require", network: true }),
      configPath,
      ...over,
    });
  }
  async function run(command: string, over: Partial<ExecToolOptions> = {}, working_dir?: string) {
    return tool(over).execute({ command, working_dir }, makeContext({ workspace: ws }).ctx);
  }

  beforeAll(() => {
    Object.assign(process.env, SECRETS);
  });
  afterAll(() => {
    for (const name of Object.keys(SECRETS)) delete process.env[name];
  });
  beforeEach(async () => {
    // The default layout: the workspace inside the state folder, beside config.json and .env.
    root = await temps.make("palaver-sandbox-");
    state = join(root, "state");
    ws = join(state, "workspace");
    await mkdir(ws, { recursive: true });
    configPath = join(state, "config.json");
    await writeFile(configPath, JSON.stringify({ providers: { x: { apiKey: CONFIG_SECRET } } }));
    await writeFile(join(state, ".env"), `OPENAI_API_KEY=${DOTENV_SECRET}\n`);
  });
  afterEach(async () => {
    await temps.cleanup();
  });

  it("cannot read the config, the state folder's .env or anything of the home folder", async () => {
    const out = await run(
      `cat ../config.json; cat ${configPath}; cat ${join(state, ".env")}; cat ../.env; ls ${root}; ls ~/..`,
      { restrictToWorkspace: false },
    );
    expect(out).toMatch(/No such file or directory/);
    expect(out).not.toContain(CONFIG_SECRET);
    expect(out).not.toContain(DOTENV_SECRET);
    expect(out).not.toContain("config.json\n");
  });

  it("hides the state folder also when it lies inside the workspace", async () => {
    const inner = join(ws, "private");
    await mkdir(inner);
    const innerConfig = join(inner, "config.json");
    await writeFile(innerConfig, CONFIG_SECRET);
    const out = await run("ls -a private; cat private/config.json", { configPath: innerConfig });
    expect(out).not.toContain(CONFIG_SECRET);
    expect(out).not.toMatch(/^config\.json$/m);
  });

  it("with the config in the workspace root, hides the config and .env but keeps the workspace", async () => {
    const rootConfig = join(ws, "config.json");
    await writeFile(rootConfig, CONFIG_SECRET);
    await writeFile(join(ws, "notes.md"), "my notes\n");
    await writeFile(join(ws, ".env"), `X=${DOTENV_SECRET}\n`);
    const out = await run("cat notes.md; cat config.json; cat .env", { configPath: rootConfig });
    expect(out).toMatch(/^my notes$/m);
    expect(out).not.toContain(CONFIG_SECRET);
    expect(out).not.toContain(DOTENV_SECRET);
  });

  it("reads the system read-only, writes only the workspace and a private /tmp", async () => {
    expect(await run("head -1 /etc/passwd")).toMatch(/^root:/);
    const tmpName = `/tmp/palaver-sandbox-${process.pid}-${Date.now()}`;
    const out = await run(
      `echo x > ../file; touch /usr/palaver-x; mkdir /palaver-x; echo t > ${tmpName} && cat ${tmpName}; ` +
        "echo w > notes.txt; cat notes.txt",
    );
    // Outside the workspace nothing reaches the host: ../file lands in the sandbox's own /tmp here
    // (the test workspace lives in /tmp) or is refused (a workspace under the home folder).
    await expect(readFile(join(state, "file"))).rejects.toThrow(/ENOENT/);
    expect(out).toMatch(/\/palaver-x.*Read-only file system/);
    expect(out).toMatch(/\/usr\/palaver-x.*(Read-only file system|Permission denied)/);
    expect(out).toMatch(/^t\nw$/m);
    expect(await readFile(join(ws, "notes.txt"), "utf8")).toBe("w\n");
    await expect(readFile(join(state, "file"))).rejects.toThrow();
    // /tmp was the sandbox's own.
    await expect(readFile(tmpName)).rejects.toThrow(/ENOENT/);
  });

  it("gives commands no secret in their environment, and no view of the daemon's /proc", async () => {
    const out = await run(
      `env; echo HOME=$HOME; tr '\\0' '\\n' < /proc/$PPID/environ; cat /proc/${process.pid}/environ; ` +
        `tr '\\0' '\\n' < /proc/1/environ; echo; echo PROCS=$(ls /proc | grep -c '^[0-9]')`,
    );
    for (const secret of [...Object.values(SECRETS), CONFIG_SECRET, DOTENV_SECRET])
      expect(out).not.toContain(secret);
    expect(out).not.toMatch(/^PALAVER_/m);
    expect(out).toContain(`HOME=${ws}\n`);
    // Its own PID namespace: a handful of processes, none of them palaver.
    const count = Number(/^PROCS=(\d+)$/m.exec(out)?.[1] ?? "999");
    expect(count).toBeLessThan(10);
  });

  it("runs commands as a user other than root with no capabilities, whoever runs palaver", async () => {
    const out = await run("grep -E '^(Uid|Cap[A-Za-z]+):' /proc/self/status; echo made > made.txt");
    const uids = /^Uid:\s+(.+)$/m.exec(out)?.[1]?.split(/\s+/);
    expect(uids).toHaveLength(4);
    expect(uids).not.toContain("0");
    const caps = [...out.matchAll(/^(Cap\w+):\s+(\w+)$/gm)].map(([, name, mask]) => `${name} ${mask}`);
    expect(caps).toEqual(
      ["CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"].map((c) => `${c} 0000000000000000`),
    );
    // The workspace stays writable, and what a command makes belongs to palaver's user outside.
    const made = await stat(join(ws, "made.txt"));
    expect([made.uid, made.gid]).toEqual([process.getuid!(), process.getgid!()]);
  });

  it("cannot set the host's clock (date -s fails for want of the right)", async () => {
    // Only tried without capabilities: a broken sandbox fails this test without moving the clock
    // of the machine running it.
    const out = await run(
      "if grep -q '^CapEff:[[:space:]]*0*$' /proc/self/status; then date -s 2020-01-01; echo \"exit=$?\"; " +
        "else echo 'not tried: the command has capabilities'; fi",
    );
    expect(out).toMatch(/date: cannot set date: Operation not permitted/);
    expect(out).toMatch(/^exit=1$/m);
  });

  it("cannot read the host's root-only files, which the sandbox user could as root's mapping", async () => {
    // /etc/shadow is 0640 root:shadow on Debian: readable by its owner, which the sandbox user is outside.
    const out = await run("cat /etc/shadow; echo done");
    expect(out).toMatch(/^done$/m);
    expect(out).not.toMatch(/^root:/m);
  });

  it("on timeout kills every process the command started, also one that called setsid", async () => {
    const marker = String(900_000 + Math.floor(Math.random() * 99_999));
    const out = await run(`setsid sleep ${marker} & echo $! > started; wait`, { timeoutSeconds: 3 });
    expect(out).toMatch(/did not finish within 3 seconds and was killed, with every process it started/);
    expect((await readFile(join(ws, "started"), "utf8")).trim()).toMatch(/^\d+$/);
    await waitFor(
      async () => (await processesRunning(["sleep", marker])).length === 0,
      10_000,
      "the setsid child to be gone",
    );
  });

  it("stops every process when the turn is aborted", async () => {
    const marker = String(800_000 + Math.floor(Math.random() * 99_999));
    const { ctx, controller } = makeContext({ workspace: ws });
    const pending = tool().execute({ command: `setsid sleep ${marker} & wait` }, ctx);
    await waitFor(
      async () => (await processesRunning(["sleep", marker])).length === 1,
      15_000,
      "the setsid child to start",
    );
    controller.abort();
    expect(await pending).toMatch(/stopped/);
    await waitFor(async () => (await processesRunning(["sleep", marker])).length === 0, 10_000, "its end");
  });

  it("refuses a working_dir outside the workspace (the sandbox shows only the workspace)", async () => {
    await expect(run("pwd", { restrictToWorkspace: false }, root)).rejects.toThrow(
      /outside the workspace: sandboxed commands see only the workspace/,
    );
  });

  describe("network", () => {
    let server: Server;
    let port: number;
    beforeAll(async () => {
      server = createServer((socket) => socket.end("hello from the host\n"));
      await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
      port = (server.address() as AddressInfo).port;
    });
    afterAll(async () => {
      await new Promise((resolve) => server.close(resolve));
    });

    // A client that exists inside any sandbox: bash's /dev/tcp (bash lives in /bin, which the sandbox shows).
    const client = (p: number) =>
      `bash -c 'exec 3<>/dev/tcp/127.0.0.1/${p} && head -n 1 <&3 || echo "failed to connect"'`;

    it("reaches the host's loopback with network on", async () => {
      expect(await run(client(port))).toContain("hello from the host");
    });

    it("has no network with tools.exec.network false", async () => {
      const sandbox = new ExecSandbox({ mode: "require", network: false });
      const out = await run(client(port), { sandbox });
      expect(out).not.toContain("hello from the host");
      expect(out).toMatch(/failed to connect/);
    });
  });
});
