/**
 * `palaver service install`: the pure pieces (renderUnit and friends) directly, the command
 * as a real child process with HOME, XDG_CONFIG_HOME and PALAVER_SYSTEMD_DIR pointing into a
 * temp folder (nothing touches the real home or /etc), and the rendered units through
 * `systemd-analyze verify` where systemd is installed.
 */
import { spawn, spawnSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { chmod, chown, mkdir, mkdtemp, readFile, readdir, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir, userInfo } from "node:os";
import { dirname, join } from "node:path";
import { parse as parseDotenv } from "dotenv";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import {
  installWarnings,
  nextCommands,
  renderUnit,
  resolveRunAs,
  servicePath,
  unitDir,
  type UnitValues,
} from "../../src/cli/service.js";
import { EXIT_CONFIG } from "../../src/util/errors.js";
import { expectedSystemUnit, expectedUserUnit } from "./expected-units.js";
import { CHILD_TIMEOUT_MS, MAIN, runCli, type CliResult } from "../helpers/cli.js";
import { haveCommand, requireOrSkip, requireOrSkipNow } from "../helpers/requires.js";
import { waitFor } from "../helpers/wait.js";

const ROOT = join(import.meta.dirname, "..", "..");
const TEMPLATE = readFileSync(join(ROOT, "systemd", "palaver.service"), "utf8");
const ME = userInfo().username;
const NODE_DIR = dirname(process.execPath);
const STANDARD_PATH = ["/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin"];
const NO_SCRIPT = requireOrSkip(
  haveCommand("script")
    ? ""
    : "the service test on a terminal needs util-linux `script` (apt-get install bsdutils)",
);

const VALUES: UnitValues = {
  node: "/opt/node/bin/node",
  entry: "/opt/palaver/dist/main.js",
  config: "/home/bob/.palaver/config.json",
  stateDir: "/home/bob/.palaver",
  workspace: "/srv/palaver/workspace",
  user: "bob",
  path: "/opt/node/bin:/usr/bin:/bin",
};

/** The value of every uncommented `Key=` line, in order. */
function settings(unit: string, key: string): string[] {
  return unit
    .split("\n")
    .filter((l) => l.startsWith(`${key}=`))
    .map((l) => l.slice(key.length + 1));
}

describe("renderUnit", () => {
  it("renders a system unit: every placeholder filled, User= set, hardening on", () => {
    const unit = renderUnit(TEMPLATE, VALUES, { user: false });
    expect(unit).not.toMatch(/@[A-Z_]+@/);
    expect(unit).not.toMatch(/^#\[|^##/m);
    expect(settings(unit, "ExecStart")).toEqual([
      "/opt/node/bin/node /opt/palaver/dist/main.js gateway --config /home/bob/.palaver/config.json " +
        "--workspace /srv/palaver/workspace",
    ]);
    expect(settings(unit, "User")).toEqual(["bob"]);
    expect(settings(unit, "ExecReload")).toEqual(["/bin/kill -HUP $MAINPID"]);
    expect(settings(unit, "WorkingDirectory")).toEqual(["/home/bob/.palaver"]);
    expect(settings(unit, "ReadWritePaths")).toEqual(["/home/bob/.palaver /srv/palaver/workspace"]);
    expect(settings(unit, "Environment")).toEqual([
      "NODE_ENV=production",
      "PATH=/opt/node/bin:/usr/bin:/bin",
      // Node's compile cache outlives a restart: PrivateTmp= empties its default folder under /tmp.
      "NODE_COMPILE_CACHE=%C/palaver/node-compile-cache",
    ]);
    expect(settings(unit, "CacheDirectory")).toEqual(["palaver"]);
    expect(settings(unit, "WantedBy")).toEqual(["multi-user.target"]);
    expect(settings(unit, "After")).toEqual(["network-online.target"]);
    const expected: Record<string, string> = {
      Type: "notify",
      NotifyAccess: "all",
      WatchdogSec: "60",
      Restart: "on-failure",
      RestartSec: "5",
      RestartPreventExitStatus: "78",
      NoNewPrivileges: "yes",
      ProtectSystem: "strict",
      ProtectHome: "read-only",
      PrivateTmp: "yes",
      ProtectKernelTunables: "yes",
      ProtectControlGroups: "yes",
      RestrictSUIDSGID: "yes",
      LockPersonality: "yes",
      CapabilityBoundingSet: "",
    };
    for (const [key, value] of Object.entries(expected)) expect(settings(unit, key), key).toEqual([value]);
    expect(unit).not.toMatch(/^EnvironmentFile=/m);
    expect(unit).not.toMatch(/^MemoryDenyWriteExecute=/m);
  });

  it("renders a user unit: no User=, default.target, only sandboxing that works unprivileged", () => {
    const unit = renderUnit(TEMPLATE, VALUES, { user: true });
    expect(unit).not.toMatch(/@[A-Z_]+@/);
    expect(unit).not.toMatch(/^#\[|^##/m);
    expect(settings(unit, "User")).toEqual([]);
    expect(settings(unit, "WantedBy")).toEqual(["default.target"]);
    expect(settings(unit, "After")).toEqual([]);
    for (const key of [
      "ProtectSystem",
      "ProtectHome",
      "PrivateTmp",
      "ReadWritePaths",
      "CapabilityBoundingSet",
    ]) {
      expect(settings(unit, key), key).toEqual([]);
    }
    for (const key of ["NoNewPrivileges", "RestrictSUIDSGID", "LockPersonality"]) {
      expect(settings(unit, key), key).toEqual(["yes"]);
    }
    expect(settings(unit, "Type")).toEqual(["notify"]);
    expect(settings(unit, "ExecReload")).toEqual(["/bin/kill -HUP $MAINPID"]);
    expect(settings(unit, "RestartPreventExitStatus")).toEqual(["78"]);
    expect(settings(unit, "CacheDirectory")).toEqual(["palaver"]);
    expect(settings(unit, "ExecStart")[0]).toContain("gateway --config /home/bob/.palaver/config.json");
  });

  it("applies the markers of a small template", () => {
    const template = "## dropped\n#[system] A=@USER@\n#[user] B=@USER@\nC=@NODE@\n# see @CONFIG@\n";
    expect(renderUnit(template, VALUES, { user: false })).toBe(
      "A=bob\nC=/opt/node/bin/node\n# see /home/bob/.palaver/config.json\n",
    );
    expect(renderUnit(template, VALUES, { user: true })).toBe(
      "B=bob\nC=/opt/node/bin/node\n# see /home/bob/.palaver/config.json\n",
    );
  });

  it("quotes paths with spaces and escapes % as systemd specifiers require", () => {
    const values = {
      ...VALUES,
      config: "/home/bob/My Palaver/config.json",
      stateDir: "/home/bob/My Palaver",
    };
    values.workspace = "/home/bob/100%/ws";
    const unit = renderUnit(TEMPLATE, values, { user: false });
    expect(settings(unit, "ExecStart")[0]).toContain(
      '--config "/home/bob/My Palaver/config.json" --workspace /home/bob/100%%/ws',
    );
    expect(settings(unit, "ReadWritePaths")).toEqual(['"/home/bob/My Palaver" /home/bob/100%%/ws']);
    // WorkingDirectory= takes the rest of the line: no quotes there.
    expect(settings(unit, "WorkingDirectory")).toEqual(["/home/bob/My Palaver"]);
  });

  it("refuses values a unit file cannot hold", () => {
    const bad: [keyof UnitValues, string][] = [
      ["config", "relative/config.json"],
      ["workspace", '/home/bob/"quoted"'],
      ["entry", "/opt/$HOME/main.js"],
      ["stateDir", "/home/bob/a\nb"],
      ["node", "/opt/back\\slash/node"],
      ["user", "bob smith"],
      ["user", ""],
    ];
    for (const [key, value] of bad) {
      expect(() => renderUnit(TEMPLATE, { ...VALUES, [key]: value }, { user: false }), key).toThrow(
        /cannot write the unit/,
      );
    }
  });

  it("names an unknown placeholder in the template", () => {
    expect(() => renderUnit("ExecStart=@NODE@ @NOPE@\n", VALUES, { user: true })).toThrow(/@NOPE@/);
  });
});

describe("install helpers", () => {
  it("puts node's folder first on the service's PATH", () => {
    expect(servicePath("/home/bob/.nvm/versions/node/v20.19.0/bin/node")).toBe(
      "/home/bob/.nvm/versions/node/v20.19.0/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    );
    expect(servicePath("/usr/bin/node")).toBe("/usr/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/sbin:/bin");
  });

  it("finds the unit folder", () => {
    expect(unitDir({ user: false, env: {} })).toBe("/etc/systemd/system");
    expect(unitDir({ user: true, env: {}, home: "/home/bob" })).toBe("/home/bob/.config/systemd/user");
    expect(unitDir({ user: true, env: { XDG_CONFIG_HOME: "/x/conf" }, home: "/home/bob" })).toBe(
      "/x/conf/systemd/user",
    );
    expect(unitDir({ user: false, env: { PALAVER_SYSTEMD_DIR: "/stage" } })).toBe("/stage");
    expect(unitDir({ user: true, env: { PALAVER_SYSTEMD_DIR: "/stage" } })).toBe("/stage");
  });

  it("chooses an unprivileged account for system units", () => {
    expect(resolveRunAs({ user: true, currentUser: "bob", env: {} })).toBe("bob");
    expect(() => resolveRunAs({ user: true, runAs: "eve", currentUser: "bob", env: {} })).toThrow(/--run-as/);
    expect(resolveRunAs({ user: false, currentUser: "bob", env: {} })).toBe("bob");
    expect(resolveRunAs({ user: false, runAs: "palaver", currentUser: "bob", env: {} })).toBe("palaver");
    expect(resolveRunAs({ user: false, currentUser: "root", env: { SUDO_USER: "bob" } })).toBe("bob");
    expect(() => resolveRunAs({ user: false, currentUser: "root", env: {} })).toThrow(
      /would run palaver as root.*Choose one: .*--run-as USER.*--user/,
    );
    expect(resolveRunAs({ user: false, runAs: "root", currentUser: "root", env: {} })).toBe("root");
  });

  it("warns about what would make the service fail", () => {
    const base = { user: false, values: VALUES, currentUser: "bob", home: "/home/bob", configExists: true };
    expect(installWarnings({ ...base, exists: () => true })).toEqual([]);
    const none = installWarnings({ ...base, configExists: false, exists: () => false });
    expect(none).toHaveLength(4);
    expect(none[0]).toMatch(/no config file at \/home\/bob\/\.palaver\/config\.json/);
    expect(none[1]).toMatch(/dist\/main\.js does not exist yet: run `npm run build` in \/opt\/palaver/);
    expect(none[2]).toMatch(/state folder/);
    expect(none[3]).toMatch(/workspace \/srv\/palaver\/workspace does not exist/);
    // A user unit's workspace is created by palaver itself: no sandbox in the way.
    expect(installWarnings({ ...base, user: true, exists: (p) => p !== VALUES.workspace })).toEqual([]);
    // sudo with root's HOME: the config found is root's, which the service user cannot read.
    const viaSudo = installWarnings({
      ...base,
      currentUser: "root",
      home: "/root",
      values: { ...VALUES, config: "/root/.palaver/config.json" },
      exists: () => true,
    });
    expect(viaSudo).toEqual([expect.stringMatching(/config is in root's home .* runs as bob/)]);
  });

  it("lists the systemctl commands", () => {
    expect(nextCommands({ user: true, runAs: "bob", replaced: false, root: false })).toEqual([
      "systemctl --user daemon-reload",
      "systemctl --user enable --now palaver.service",
      "systemctl --user status palaver.service   # is it running?",
      "journalctl --user -u palaver.service -f   # follow its logs",
      "loginctl enable-linger bob   # start at boot and keep running after you log out",
    ]);
    expect(nextCommands({ user: false, runAs: "bob", replaced: true, root: false })).toEqual([
      "sudo systemctl daemon-reload",
      "sudo systemctl restart palaver.service",
      "systemctl status palaver.service   # is it running?",
      "journalctl -u palaver.service -f   # follow its logs",
    ]);
    expect(nextCommands({ user: false, runAs: "bob", replaced: false, root: true })[1]).toBe(
      "systemctl enable --now palaver.service",
    );
  });
});

describe("palaver service install (child process)", () => {
  let dir: string;
  let home: string;
  let xdg: string;
  let stateDir: string;
  let workspace: string;
  let configPath: string;

  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), "palaver-service-"));
    home = join(dir, "home");
    xdg = join(dir, "xdg");
    stateDir = join(home, ".palaver");
    workspace = join(dir, "ws");
    configPath = join(stateDir, "config.json");
    await mkdir(stateDir, { recursive: true });
    await mkdir(workspace);
    await writeFile(configPath, JSON.stringify({ agents: { defaults: { workspace } } }));
    // The key the service will use, where the service reads it (tests of the cwd .env remove it).
    await writeFile(stateEnv(), "PALAVER_PROVIDERS__OPENAI__API_KEY=sk-state\n");
    // This machine may have no systemd running (a container): a systemctl that answers as a
    // running manager does stands in for it; the tests of a missing manager replace it.
    await fakeSystemctl(bin(), "echo Version=255");
  });
  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  function cli(
    args: string[],
    extraEnv: Record<string, string> = {},
    as?: { uid: number; gid: number },
  ): Promise<CliResult> {
    return runCli(args, {
      as,
      cwd: dir,
      env: {
        HOME: home,
        XDG_CONFIG_HOME: xdg,
        PALAVER_LOG_LEVEL: "warn",
        PATH: `${bin()}:${process.env.PATH ?? ""}`,
        ...extraEnv,
      },
    });
  }

  const bin = () => join(dir, "bin");
  /** A `systemctl` in `folder` that runs the shell `body`. */
  async function fakeSystemctl(folder: string, body: string): Promise<void> {
    await mkdir(folder, { recursive: true });
    await writeFile(join(folder, "systemctl"), `#!/bin/sh\n${body}\n`, { mode: 0o755 });
  }

  const expectedValues = (user: string): UnitValues => ({
    node: process.execPath,
    entry: join(ROOT, "dist", "main.js"),
    config: configPath,
    stateDir,
    workspace,
    user,
    // node's folder first, then the standard ones (without node's again when it lives in one).
    path: [NODE_DIR, ...STANDARD_PATH.filter((d) => d !== NODE_DIR)].join(":"),
  });
  const userUnitPath = () => join(xdg, "systemd", "user", "palaver.service");
  const stateEnv = () => join(stateDir, ".env");
  const cwdEnv = () => join(dir, ".env");

  it("--user --dry-run prints the unit on stdout, the commands on stderr, and writes nothing", async () => {
    const run = await cli(["service", "install", "--user", "--dry-run", "--config", configPath]);
    expect(run.code).toBe(0);
    expect(run.stdout).toBe(expectedUserUnit(expectedValues(ME)));
    expect(run.stderr).toContain(`Would write ${userUnitPath()}`);
    for (const command of [
      "systemctl --user daemon-reload",
      "systemctl --user enable --now palaver.service",
      "systemctl --user status palaver.service",
      "journalctl --user -u palaver.service -f",
      `loginctl enable-linger ${ME}`,
    ]) {
      expect(run.stderr).toContain(command);
    }
    expect(run.stderr).not.toMatch(/no config file/);
    expect(existsSync(join(xdg, "systemd"))).toBe(false);
  });

  it("--user writes the unit under XDG_CONFIG_HOME, then never overwrites a changed one without --force", async () => {
    const expected = expectedUserUnit(expectedValues(ME));
    const first = await cli(["service", "install", "--user", "--config", configPath]);
    expect(first.code).toBe(0);
    expect(await readFile(userUnitPath(), "utf8")).toBe(expected);
    expect(first.stdout).toContain(`Wrote ${userUnitPath()}`);
    expect(first.stdout).toContain("systemctl --user enable --now palaver.service");
    expect(first.stdout).toContain(`loginctl enable-linger ${ME}`);

    const again = await cli(["service", "install", "--user", "--config", configPath]);
    expect(again.code).toBe(0);
    expect(again.stdout).toContain("already up to date");

    const edited = `${expected}# a hand edit\n`;
    await writeFile(userUnitPath(), edited);
    const refused = await cli(["service", "install", "--user", "--config", configPath]);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(/already exists .*--force replaces the file/);
    expect(await readFile(userUnitPath(), "utf8")).toBe(edited);

    const forced = await cli(["service", "install", "--user", "--force", "--config", configPath]);
    expect(forced.code).toBe(0);
    expect(await readFile(userUnitPath(), "utf8")).toBe(expected);
    expect(forced.stdout).toContain(`Replaced ${userUnitPath()}`);
    expect(forced.stdout).toContain("systemctl --user restart palaver.service");
  });

  it("with no user manager to run it, says so, writes nothing and points to another supervisor", async () => {
    await fakeSystemctl(bin(), 'echo "Failed to connect to bus: No medium found" >&2; exit 1');
    const run = await cli(["service", "install", "--user", "--config", configPath]);
    expect(run.code).toBe(1);
    expect(run.stderr).toContain(
      "There is no systemd user manager to run a user unit (systemctl --user: Failed to connect to bus: No medium found).",
    );
    expect(run.stderr).toContain("run `palaver gateway` under the supervisor you have");
    expect(run.stderr).toContain("Nothing was written; --force writes the unit anyway.");
    expect(run.stdout).toBe("");
    expect(existsSync(join(xdg, "systemd"))).toBe(false);

    const forced = await cli(["service", "install", "--user", "--force", "--config", configPath]);
    expect(forced.code).toBe(0);
    expect(forced.stderr).toContain("The unit is written anyway (--force).");
    expect(existsSync(userUnitPath())).toBe(true);
  });

  it("with no systemctl on PATH at all, writes nothing", async () => {
    const empty = join(dir, "empty-bin");
    await mkdir(empty);
    const run = await cli(["service", "install", "--user", "--config", configPath], { PATH: empty });
    expect(run.code).toBe(1);
    expect(run.stderr).toContain("(systemctl --user: systemctl is not installed)");
    expect(existsSync(join(xdg, "systemd"))).toBe(false);
  });

  it.runIf(ME === "root")("as root, explains the choice before writing a user unit", async () => {
    const run = await cli(["service", "install", "--user", "--dry-run", "--config", configPath]);
    expect(run.code).toBe(0);
    expect(run.stderr).toContain("note: You are root, so this is a user unit for root's own user manager");
    expect(run.stderr).toContain("`palaver service install --run-as USER`");
  });

  it("a system unit goes to PALAVER_SYSTEMD_DIR with User= from --run-as", async () => {
    const target = join(dir, "system");
    const run = await cli(["service", "install", "--run-as", "palaver-bot", "--config", configPath], {
      PALAVER_SYSTEMD_DIR: target,
    });
    expect(run.code).toBe(0);
    const unit = await readFile(join(target, "palaver.service"), "utf8");
    expect(unit).toBe(expectedSystemUnit(expectedValues("palaver-bot")));
    expect(settings(unit, "User")).toEqual(["palaver-bot"]);
    expect(run.stdout).toContain("systemctl enable --now palaver.service");
    expect(run.stdout).toContain("journalctl -u palaver.service -f");
    expect(run.stdout).not.toContain("enable-linger");
  });

  it("refuses --run-as for a user unit", async () => {
    const run = await cli([
      "service",
      "install",
      "--user",
      "--run-as",
      "eve",
      "--dry-run",
      "--config",
      configPath,
    ]);
    expect(run.code).toBe(1);
    expect(run.stderr).toMatch(/--run-as is for system units/);
    expect(run.stdout).toBe("");
  });

  it("--dry-run with keys only in the cwd .env: checks with them, says it would copy them, writes nothing", async () => {
    await rm(stateEnv());
    await writeFile(cwdEnv(), "PALAVER_PROVIDERS__OPENAI__API_KEY=sk-cwd-secret\n");
    const run = await cli(["service", "install", "--user", "--dry-run", "--config", configPath]);
    expect(run.code).toBe(0);
    expect(run.stdout).toBe(expectedUserUnit(expectedValues(ME)));
    expect(run.stderr).toContain(
      `Would copy PALAVER_PROVIDERS__OPENAI__API_KEY from ${cwdEnv()} into ${stateEnv()}`,
    );
    expect(run.stderr).not.toContain("sk-cwd-secret");
    expect(existsSync(stateEnv())).toBe(false);
    expect(existsSync(join(xdg, "systemd"))).toBe(false);
  });

  it("copies keys found only in the cwd .env with --yes (0600), never without asking", async () => {
    // The state folder's .env has something else, and no final newline.
    await writeFile(stateEnv(), "OTHER=kept");
    const value = "sk-cwd #1 'x'";
    await writeFile(cwdEnv(), `PALAVER_PROVIDERS__OPENAI__API_KEY="${value}"\nOTHER=ignored\n`);

    const refused = await cli(["service", "install", "--user", "--config", configPath]);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(
      /PALAVER_PROVIDERS__OPENAI__API_KEY is set only in .*\.env, which the service does not read; nothing was written\. Run again with --yes/,
    );
    expect(await readFile(stateEnv(), "utf8")).toBe("OTHER=kept");
    expect(existsSync(userUnitPath())).toBe(false);

    const run = await cli(["service", "install", "--user", "--yes", "--config", configPath]);
    expect(run.code).toBe(0);
    expect(run.stdout).toContain(
      `Copied PALAVER_PROVIDERS__OPENAI__API_KEY from ${cwdEnv()} into ${stateEnv()}`,
    );
    expect(run.stdout).toContain("journalctl --user -u palaver.service -f   # follow its logs");
    expect(existsSync(userUnitPath())).toBe(true);
    expect((await stat(stateEnv())).mode & 0o777).toBe(0o600);
    expect(parseDotenv(await readFile(stateEnv(), "utf8"))).toEqual({
      OTHER: "kept",
      PALAVER_PROVIDERS__OPENAI__API_KEY: value,
    });

    // Nothing left to copy: a second run neither asks nor appends.
    const copied = await readFile(stateEnv(), "utf8");
    const again = await cli(["service", "install", "--user", "--config", configPath]);
    expect(again.code).toBe(0);
    expect(again.stdout).toContain("already up to date");
    expect(await readFile(stateEnv(), "utf8")).toBe(copied);
  });

  it.skipIf(NO_SCRIPT)("on a terminal it asks before copying, and copies only on yes", async () => {
    await rm(stateEnv());
    await writeFile(cwdEnv(), "PALAVER_PROVIDERS__OPENAI__API_KEY=sk-cwd\n");
    const no = await onTerminal(["service", "install", "--user", "--config", configPath], "n");
    expect(no.code).toBe(1);
    expect(no.output).toContain("nothing was written");
    expect(existsSync(stateEnv())).toBe(false);
    expect(existsSync(userUnitPath())).toBe(false);

    const yes = await onTerminal(["service", "install", "--user", "--config", configPath], "y");
    expect(yes.code).toBe(0);
    expect(yes.output).toContain(`Copied PALAVER_PROVIDERS__OPENAI__API_KEY from ${cwdEnv()}`);
    expect(parseDotenv(await readFile(stateEnv(), "utf8"))).toEqual({
      PALAVER_PROVIDERS__OPENAI__API_KEY: "sk-cwd",
    });
    expect(existsSync(userUnitPath())).toBe(true);
  });

  /** Runs the CLI on a pseudo-terminal (util-linux `script`), answering its question once asked. */
  async function onTerminal(
    args: string[],
    answer: string,
  ): Promise<{ code: number | null; output: string }> {
    const quote = (word: string) => `'${word.replaceAll("'", `'\\''`)}'`;
    const command = [process.execPath, MAIN, ...args].map(quote).join(" ");
    const child = spawn("script", ["-qec", command, "/dev/null"], {
      cwd: dir,
      env: {
        PATH: `${bin()}:${process.env.PATH ?? ""}`,
        NO_COLOR: "1",
        HOME: home,
        XDG_CONFIG_HOME: xdg,
        PALAVER_LOG_LEVEL: "warn",
      },
    });
    let output = "";
    child.stdout.on("data", (d: Buffer) => (output += d.toString()));
    child.stderr.on("data", (d: Buffer) => (output += d.toString()));
    const exited = new Promise<number | null>((resolve) => child.on("close", resolve));
    try {
      await waitFor(
        () => output.includes("[y/N]") || child.exitCode !== null,
        CHILD_TIMEOUT_MS,
        "the question",
      );
      child.stdin.write(`${answer}\n`);
      return { code: await exited, output };
    } finally {
      child.kill("SIGKILL");
    }
  }

  it("refuses a unit whose gateway would not start, naming a key set only in the shell", async () => {
    await rm(stateEnv());
    const run = await cli(["service", "install", "--user", "--dry-run", "--config", configPath], {
      PALAVER_PROVIDERS__OPENAI__API_KEY: "sk-shell",
    });
    expect(run.code).toBe(1);
    expect(run.stdout).toBe("");
    expect(run.stderr).toMatch(
      /the service would not start, so no unit is printed: No LLM provider is configured/,
    );
    expect(run.stderr).toContain(
      `PALAVER_PROVIDERS__OPENAI__API_KEY is set in this shell, which the service does not see: put it in ${stateEnv()}`,
    );
    expect(run.stderr).not.toContain("sk-shell");
  });

  it("warns about a shell-only override when the service would start anyway", async () => {
    const run = await cli(["service", "install", "--user", "--dry-run", "--config", configPath], {
      PALAVER_AGENTS__DEFAULTS__MODEL: "gpt-4o",
    });
    expect(run.code).toBe(0);
    expect(run.stderr).toContain(
      `warning: PALAVER_AGENTS__DEFAULTS__MODEL is set in this shell only: the service will not see it (put it in ${stateEnv()})`,
    );
  });

  it("refuses a --config path that does not exist (exit 78, like every command)", async () => {
    const missing = join(stateDir, "other.json");
    const run = await cli(["service", "install", "--user", "--dry-run", "--config", missing]);
    expect(run.code).toBe(EXIT_CONFIG);
    expect(run.stderr).toContain(`config file ${missing} (given with --config) does not exist`);
    expect(run.stdout).toBe("");
  });

  it("exits 78 on a bad config instead of writing a unit for it", async () => {
    await writeFile(configPath, JSON.stringify({ gateway: { port: "http" } }));
    const run = await cli(["service", "install", "--user", "--config", configPath]);
    expect(run.code).toBe(EXIT_CONFIG);
    expect(run.stderr).toContain("gateway.port");
    expect(existsSync(userUnitPath())).toBe(false);
  });

  it("says plainly that a system unit needs root when it cannot write", async (ctx) => {
    // Root writes anywhere, so as root (CI) the command runs as `nobody`, who owns the test's folder.
    let as: { uid: number; gid: number } | undefined;
    let runAs = ME;
    if (process.getuid?.() === 0) {
      const id = (flag: string) => spawnSync("id", [flag, "nobody"], { encoding: "utf8" });
      const [uid, gid] = [id("-u"), id("-g")];
      if (uid.status !== 0 || gid.status !== 0) {
        requireOrSkipNow(ctx, `the non-root service test needs a user "nobody": ${uid.stderr.trim()}`);
      }
      as = { uid: Number(uid.stdout), gid: Number(gid.stdout) };
      const probe = spawnSync(process.execPath, ["-e", "require('fs').accessSync(process.argv[1])", MAIN], {
        ...as,
        encoding: "utf8",
      });
      if (probe.status !== 0) {
        // Where the clone lives is not a missing tool: skipped (with the reason) in CI too.
        const reason =
          `"nobody" cannot run ${MAIN} with ${process.execPath} (make the clone readable to all): ` +
          (probe.error?.message ?? probe.stderr.trim());
        console.warn(`skipped: ${reason}`);
        ctx.skip(reason);
      }
      runAs = "nobody";
      await chownTree(dir, as);
    }
    const target = join(dir, "readonly");
    await mkdir(target);
    await chmod(target, 0o555);
    if (as) await chown(target, as.uid, as.gid);
    const run = await cli(
      ["service", "install", "--run-as", runAs, "--config", configPath],
      { PALAVER_SYSTEMD_DIR: target },
      as,
    );
    expect(run.code).toBe(1);
    expect(run.stderr).toMatch(
      /cannot write .*palaver\.service: permission denied; a system unit needs root/,
    );
    await chmod(target, 0o755);
  });
});

/** Gives `dir` and everything in it to `owner`. */
async function chownTree(dir: string, owner: { uid: number; gid: number }): Promise<void> {
  await chown(dir, owner.uid, owner.gid);
  for (const entry of await readdir(dir, { recursive: true })) {
    await chown(join(dir, entry), owner.uid, owner.gid);
  }
}

const NO_ANALYZE = requireOrSkip(
  haveCommand("systemd-analyze") ? "" : "verifying the unit needs systemd-analyze (apt-get install systemd)",
);

describe.skipIf(NO_ANALYZE)("systemd-analyze verify", () => {
  let dir: string;
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), "palaver-verify-"));
  });
  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  for (const user of [false, true]) {
    it(`accepts the rendered ${user ? "user" : "system"} unit without complaint`, async (ctx) => {
      const state = join(dir, "state");
      const runtime = join(dir, "runtime");
      await mkdir(join(state, "workspace"), { recursive: true });
      await mkdir(runtime, { mode: 0o700 });
      const unitFile = join(dir, "palaver.service");
      const values: UnitValues = {
        node: process.execPath,
        entry: join(ROOT, "dist", "main.js"),
        config: join(state, "config.json"),
        stateDir: state,
        workspace: join(state, "workspace"),
        user: ME,
        path: `${dirname(process.execPath)}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin`,
      };
      await writeFile(unitFile, renderUnit(TEMPLATE, values, { user }));
      const args = user ? ["--user", "verify", unitFile] : ["verify", unitFile];
      const run = spawnSync("systemd-analyze", args, {
        encoding: "utf8",
        timeout: 15_000,
        // A user manager needs a runtime folder; give it an empty one of ours.
        env: { ...process.env, XDG_RUNTIME_DIR: runtime, SYSTEMD_LOG_COLOR: "0" },
      });
      if (/Failed to initialize manager|Failed to lookup RuntimeDirectory/.test(run.stderr)) {
        requireOrSkipNow(ctx, `systemd-analyze cannot run a test manager here: ${run.stderr.trim()}`);
      }
      // verify exits 0 even for unknown keys; its complaints name the file, so none may appear.
      const complaints = run.stderr.split("\n").filter((l) => l.includes(unitFile));
      expect(complaints).toEqual([]);
      expect(run.status).toBe(0);
    });
  }
});
