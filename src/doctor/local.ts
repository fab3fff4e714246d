/**
 * What `palaver doctor` checks on this machine: Node, the exec sandbox, the state folder (writable,
 * space, modes), the systemd unit and the gateway's port. Reads only; `--fix` is fix.ts.
 */
import { access, constants, mkdtemp, rm, stat, statfs } from "node:fs/promises";
import { existsSync } from "node:fs";
import { createServer } from "node:net";
import { delimiter, join } from "node:path";
import { ExecSandbox, describeSandbox } from "../agent/tools/exec/sandbox.js";
import type { Config } from "../config/schema.js";
import { errorMessage } from "../util/errors.js";
import { fail, ok, warn, type CheckResult } from "./types.js";

/** The oldest Node palaver supports, and the one it is moving to. */
const MIN_NODE_MAJOR = 20;
const LOW_DISK_BYTES = 500 * 1024 * 1024;

export function nodeCheck(version = process.versions.node): CheckResult {
  const major = Number(version.split(".")[0]);
  if (major >= 22) return ok("node", `Node ${version}`);
  if (major >= MIN_NODE_MAJOR)
    return warn(
      "node",
      `Node ${version}`,
      "move to Node 22 LTS or newer: palaver is moving to engines >= 22.13",
    );
  return fail("node", `Node ${version}`, "install Node 22 LTS or newer");
}

export async function sandboxCheck(
  config: Config,
  env: NodeJS.ProcessEnv = process.env,
): Promise<CheckResult> {
  const mode = config.tools.exec.sandbox;
  if (mode === "off") return ok("sandbox", 'tools.exec.sandbox is "off": commands run without bubblewrap');
  const bwrap = findOnPath("bwrap", env.PATH ?? "");
  if (!bwrap) {
    const result = mode === "require" ? fail : warn;
    return result(
      "sandbox",
      "bubblewrap (bwrap) is not installed or not on PATH: shell commands run unsandboxed",
      'install it with `sudo apt-get install bubblewrap` (Debian/Ubuntu), or set tools.exec.sandbox to "off" on purpose',
    );
  }
  const sandbox = new ExecSandbox({ mode: "auto", network: config.tools.exec.network, bwrapPath: bwrap });
  const state = await sandbox.state();
  if (state.sandboxed) return ok("sandbox", describeSandbox(state));
  return (mode === "require" ? fail : warn)(
    "sandbox",
    describeSandbox(state),
    "allow unprivileged user namespaces (`sysctl kernel.unprivileged_userns_clone=1`; on Ubuntu 24.04 an AppArmor profile for bwrap)",
  );
}

function findOnPath(name: string, path: string): string | null {
  for (const dir of path.split(delimiter).filter(Boolean)) {
    const candidate = join(dir, name);
    if (existsSync(candidate)) return candidate;
  }
  return null;
}

/** The state folder exists (or can be made), a file can be written in it, and there is room. */
export async function stateDirChecks(dir: string): Promise<CheckResult[]> {
  const results: CheckResult[] = [];
  let info;
  try {
    info = await stat(dir);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") {
      return [
        warn(
          "state folder",
          `${dir} does not exist yet`,
          "`palaver doctor --fix` creates it (0700), or `palaver onboard`",
        ),
      ];
    }
    // ENOTDIR: a part of the path is a file; EACCES: a folder above it is closed to this user.
    return [
      fail(
        "state folder",
        `${dir} cannot be used: ${errorMessage(err)}`,
        `make ${dir} a folder the user palaver runs as can write (or move the config elsewhere)`,
      ),
    ];
  }
  if (!info.isDirectory()) {
    return [
      fail(
        "state folder",
        `${dir} is not a folder`,
        `move what is at ${dir} away; the state folder is the config's folder`,
      ),
    ];
  }
  try {
    await access(dir, constants.W_OK);
    const probe = await mkdtemp(join(dir, ".doctor-"));
    await rm(probe, { recursive: true, force: true });
    results.push(ok("state folder", `${dir} is writable`));
  } catch (err) {
    results.push(
      fail(
        "state folder",
        `${dir} cannot be written: ${errorMessage(err)}`,
        `give the user palaver runs as write access to ${dir} (chown), and check the disk is not mounted read-only`,
      ),
    );
  }
  if ((info.mode & 0o077) !== 0) {
    results.push(
      warn(
        "state permissions",
        `${dir} is readable by others (mode ${(info.mode & 0o777).toString(8)})`,
        "`palaver doctor --fix` sets it to 0700 (and the config to 0600)",
      ),
    );
  }
  try {
    const fs = await statfs(dir);
    const free = fs.bavail * fs.bsize;
    const mb = Math.round(free / 1024 / 1024);
    results.push(
      free < LOW_DISK_BYTES
        ? warn(
            "disk space",
            `${mb} MB free under ${dir}`,
            "free some space: the journal and sessions stop being written when the disk is full",
          )
        : ok("disk space", `${mb} MB free`),
    );
  } catch (err) {
    results.push(warn("disk space", `could not read: ${errorMessage(err)}`, "check the disk with `df -h`"));
  }
  return results;
}

/** Whether gateway.port is free, or taken by something (maybe a running gateway). */
export async function portCheck(config: Config, gatewayRuns: boolean): Promise<CheckResult> {
  const { host, port } = config.gateway;
  if (port === 0) return ok("port", "gateway.port is 0 (any free port)");
  const free = await new Promise<boolean>((resolve) => {
    const server = createServer();
    server.once("error", () => resolve(false));
    server.listen(port, host, () => server.close(() => resolve(true)));
  });
  if (free) return ok("port", `${host}:${port} is free for the gateway`);
  if (gatewayRuns) return ok("port", `${host}:${port} is in use by the running gateway`);
  return fail(
    "port",
    `${host}:${port} is in use by another program`,
    `stop it (\`ss -ltnp | grep :${port}\` names it) or set gateway.port to a free port`,
  );
}
