/**
 * Whether the systemd manager a unit is written for is there to run it: the system manager
 * (systemd as PID 1) for a system unit, the user's own manager (reached on the user bus) for
 * a user unit. Asked of `systemctl` itself, so what it says is what the next command the user
 * types would say. The decision and the words are pure functions; only the probe runs a process.
 */
import { execFile } from "node:child_process";

/** systemctl answers at once or not at all (a hung bus): this long is "not at all". */
const PROBE_TIMEOUT_MS = 5_000;

/** Why the manager cannot be reached ("Failed to connect to bus: No medium found"), or undefined when it can. */
export function probeSystemd(user: boolean): Promise<string | undefined> {
  const args = [...(user ? ["--user"] : []), "show", "--property=Version"];
  return new Promise((resolve) => {
    execFile("systemctl", args, { timeout: PROBE_TIMEOUT_MS }, (err, _stdout, stderr) => {
      if (!err) return resolve(undefined);
      const code = (err as NodeJS.ErrnoException).code;
      if (code === "ENOENT") return resolve("systemctl is not installed");
      const said = String(stderr).trim().split("\n").filter(Boolean);
      resolve(said.at(-1) ?? (err.killed ? "systemctl did not answer" : err.message));
    });
  });
}

/** What to say when the manager is missing; `forced` when the unit is written anyway (--force). */
export function noManagerMessage(options: { user: boolean; detail: string; forced: boolean }): string {
  const { user, detail } = options;
  const what = user
    ? `There is no systemd user manager to run a user unit (systemctl --user: ${detail}).`
    : `systemd is not running on this machine (systemctl: ${detail}), so nothing would start a unit.`;
  const hint = user
    ? " A user manager runs for a logged-in session, or at boot after `loginctl enable-linger USER`; " +
      "a system unit (`sudo palaver service install --run-as USER`) needs none."
    : "";
  const instead =
    " To keep palaver running without systemd, run `palaver gateway` under the supervisor you have " +
    "(a container's restart policy, supervisord, runit, or tmux).";
  return options.forced
    ? `${what} The unit is written anyway (--force).`
    : `${what}${hint}${instead} Nothing was written; --force writes the unit anyway.`;
}

/**
 * What root is told before a user unit is written: it belongs to root's own user manager, and
 * the usual setup is a system unit running as an unprivileged account.
 */
export function rootUserUnitNote(): string {
  return (
    "You are root, so this is a user unit for root's own user manager: palaver will run as root, " +
    "and only while root has a session (or after `loginctl enable-linger root`). The usual choice is " +
    "a system unit that runs palaver as an ordinary account: `palaver service install --run-as USER`."
  );
}
