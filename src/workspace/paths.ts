/**
 * Where a path given by the model really points, and whether the tools may
 * touch it. The containment check is made on real paths (symlinks followed,
 * `..` normalized), so a symlink inside the workspace that points outside it
 * is caught, also when the final file does not exist yet (write_file).
 */
import { lstat, readlink, realpath } from "node:fs/promises";
import { homedir } from "node:os";
import { basename, dirname, isAbsolute, join, resolve, sep } from "node:path";
import { ToolError } from "../util/errors.js";

export interface PathPolicy {
  /** The workspace folder (absolute, or starting with `~`). */
  workspace: string;
  /** When true, anything whose real path is outside the workspace is refused. */
  restrict: boolean;
}

/** Bound on symlink hops and path depth, so a symlink loop cannot spin forever. */
const MAX_RESOLVE_STEPS = 128;

/** `~` and `~/x` expanded; relative paths taken against `base`. */
export function expandPath(path: string, base: string): string {
  if (path === "~") return homedir();
  if (path.startsWith("~/")) return join(homedir(), path.slice(2));
  return isAbsolute(path) ? resolve(path) : resolve(base, path);
}

/** Whether `child` is `parent` or inside it (both absolute, normalized). */
export function isInside(child: string, parent: string): boolean {
  if (child === parent) return true;
  const prefix = parent.endsWith(sep) ? parent : parent + sep;
  return child.startsWith(prefix);
}

/**
 * The absolute path the model meant, checked against the workspace when
 * `restrict` is set. Returns the lexical path (what the tool reports back);
 * the check itself uses real paths.
 */
export async function resolveToolPath(path: string, policy: PathPolicy): Promise<string> {
  if (path.trim() === "") throw new ToolError("the path is empty");
  if (path.includes("\0")) throw new ToolError("the path contains a NUL character");
  const workspace = expandPath(policy.workspace, process.cwd());
  const target = expandPath(path, workspace);
  if (!policy.restrict) return target;

  const [realWorkspace, realTarget] = await Promise.all([realPathLoose(workspace), realPathLoose(target)]);
  if (!isInside(realTarget, realWorkspace)) {
    const via = realTarget === target ? "" : ` (it resolves to ${realTarget})`;
    throw new ToolError(
      `access denied: ${path} is outside the workspace ${workspace}${via}. ` +
        "File and shell tools are restricted to the workspace (tools.restrictToWorkspace); " +
        "use a path inside it.",
    );
  }
  return target;
}

/**
 * fs.realpath that also works for paths that do not exist yet: the nearest
 * existing ancestor is resolved and the missing rest appended. A dangling
 * symlink is followed by hand, since writing through it would create its
 * target.
 */
export async function realPathLoose(path: string): Promise<string> {
  let current = resolve(path);
  let suffix: string[] = [];
  for (let step = 0; step < MAX_RESOLVE_STEPS; step++) {
    try {
      const real = await realpath(current);
      return suffix.length ? join(real, ...suffix) : real;
    } catch (err) {
      if (!isMissing(err)) throw new ToolError(`cannot resolve ${path}: ${describe(err)}`, { cause: err });
    }
    const link = await readLinkIfSymlink(current);
    if (link !== null) {
      // A dangling symlink: continue from where it points.
      current = resolve(dirname(current), link);
      continue;
    }
    const parent = dirname(current);
    if (parent === current) return join(current, ...suffix);
    suffix = [basename(current), ...suffix];
    current = parent;
  }
  throw new ToolError(`cannot resolve ${path}: too many levels of symbolic links`);
}

async function readLinkIfSymlink(path: string): Promise<string | null> {
  try {
    const st = await lstat(path);
    return st.isSymbolicLink() ? await readlink(path) : null;
  } catch (err) {
    if (isMissing(err)) return null;
    throw new ToolError(`cannot resolve ${path}: ${describe(err)}`, { cause: err });
  }
}

function isMissing(err: unknown): boolean {
  const code = (err as NodeJS.ErrnoException | undefined)?.code;
  return code === "ENOENT" || code === "ENOTDIR";
}

function describe(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/** palaver's own secrets on disk: never attached to a message, whatever restrictToWorkspace says. */
export interface SecretPaths {
  /** The state folder (beside the config): config, journal, cron store, lock, `.env`. */
  stateDir?: string;
  /** The config file itself (it may sit outside the state folder, or inside the workspace). */
  configPath?: string;
}

/**
 * Whether `real` is in the state folder and not in a workspace nested inside
 * it (the default layout, ~/.palaver/workspace). A state folder inside the
 * workspace is protected whole; a workspace that IS the state folder leaves
 * only the config file and dotenv files protected (nothing else could be sent).
 */
function inStateFolder(real: string, state: string, workspace: string): boolean {
  if (state === workspace || !isInside(real, state)) return false;
  return !(isInside(workspace, state) && isInside(real, workspace));
}

/** `.env`, `.env.local`, `.env.production` ...: dotenv files hold keys wherever they are. */
const DOTENV = /^\.env(\..+)?$/;

/**
 * The path as resolveToolPath gives it, refused also when it is one of
 * palaver's secrets: the config file, a dotenv file, or anything in the state
 * folder outside the workspace (the default workspace lives inside the state
 * folder, so the workspace itself stays usable). Checked on real paths, so a
 * symlink in the workspace pointing at config.json is caught too.
 */
export async function resolveNonSecretPath(
  path: string,
  policy: PathPolicy,
  secrets: SecretPaths,
): Promise<string> {
  const target = await resolveToolPath(path, policy);
  const workspace = expandPath(policy.workspace, process.cwd());
  const [real, realWorkspace, realState, realConfig] = await Promise.all([
    realPathLoose(target),
    realPathLoose(workspace),
    secrets.stateDir ? realPathLoose(resolve(secrets.stateDir)) : Promise.resolve(undefined),
    secrets.configPath ? realPathLoose(resolve(secrets.configPath)) : Promise.resolve(undefined),
  ]);
  const secret =
    DOTENV.test(basename(target)) ||
    DOTENV.test(basename(real)) ||
    real === realConfig ||
    (realState !== undefined && inStateFolder(real, realState, realWorkspace));
  if (secret) {
    throw new ToolError(
      `access denied: ${path} is one of palaver's own files (its config, a .env file or the state folder` +
        `${secrets.stateDir ? ` ${secrets.stateDir}` : ""}), which hold keys and tokens; they are never sent or attached`,
    );
  }
  return target;
}
