/**
 * What `palaver doctor --fix` may do, and nothing else: create the state folder, and set the state
 * folder to 0700 and the config file to 0600. Each is listed before it is done.
 */
import { chmod, mkdir, stat } from "node:fs/promises";
import { PRIVATE_DIR_MODE, PRIVATE_FILE_MODE } from "../util/private-fs.js";

export interface SafeFix {
  what: string;
  apply: () => Promise<void>;
}

export async function safeFixes(stateDir: string, configPath: string): Promise<SafeFix[]> {
  const fixes: SafeFix[] = [];
  const dir = await stat(stateDir).catch(() => null);
  if (!dir) {
    fixes.push({
      what: `create ${stateDir} (mode 0700)`,
      apply: () => mkdir(stateDir, { recursive: true, mode: PRIVATE_DIR_MODE }).then(() => undefined),
    });
  } else if (dir.isDirectory() && (dir.mode & 0o077) !== 0) {
    fixes.push({ what: `chmod 0700 ${stateDir}`, apply: () => chmod(stateDir, PRIVATE_DIR_MODE) });
  }
  const config = await stat(configPath).catch(() => null);
  if (config?.isFile() && (config.mode & 0o077) !== 0) {
    fixes.push({ what: `chmod 0600 ${configPath}`, apply: () => chmod(configPath, PRIVATE_FILE_MODE) });
  }
  return fixes;
}
