/** `palaver doctor`'s look at the systemd unit (here, beside service.ts, which knows the paths): installed (system or user), enabled, running, and for this config. */
import { execFile } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { promisify } from "node:util";
import { ok, warn, type CheckResult } from "../doctor/types.js";
import { UNIT_NAME, unitDir } from "./service.js";

const run = promisify(execFile);

export async function serviceCheck(
  configPath: string,
  env: NodeJS.ProcessEnv = process.env,
): Promise<CheckResult> {
  const found = [false, true]
    .map((user) => ({ user, path: join(unitDir({ user, env }), UNIT_NAME) }))
    .find((unit) => existsSync(unit.path));
  if (!found) {
    return warn(
      "service",
      "no systemd unit installed",
      "`palaver service install` (or --user) makes it start at boot and restart after a crash",
    );
  }
  const unit = readFileSync(found.path, "utf8");
  if (!unit.includes(configPath)) {
    return warn(
      "service",
      `${found.path} runs another config than ${configPath}`,
      "reinstall the unit with this config: `palaver service install --config " + configPath + "`",
    );
  }
  const ask = async (verb: string): Promise<string> => {
    try {
      const { stdout } = await run("systemctl", [...(found.user ? ["--user"] : []), verb, UNIT_NAME], {
        timeout: 5000,
      });
      return stdout.trim();
    } catch (err) {
      return ((err as { stdout?: string }).stdout ?? "unknown").trim() || "unknown";
    }
  };
  const [enabled, active] = [await ask("is-enabled"), await ask("is-active")];
  const detail = `${found.path}: ${enabled}, ${active}`;
  if (enabled !== "enabled")
    return warn("service", detail, `enable it: systemctl ${found.user ? "--user " : ""}enable ${UNIT_NAME}`);
  if (active !== "active")
    return warn("service", detail, `start it: systemctl ${found.user ? "--user " : ""}start ${UNIT_NAME}`);
  return ok("service", detail);
}
