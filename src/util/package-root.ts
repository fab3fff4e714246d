import { existsSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

/**
 * The folder holding palaver's package.json: found by walking up from this module, so it works
 * from src/ under tsx and from the bundle in dist/ alike.
 */
export function packageRoot(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (let i = 0; i < 6; i++) {
    if (existsSync(join(dir, "package.json")) && existsSync(join(dir, "workspace"))) return dir;
    dir = dirname(dir);
  }
  throw new Error("cannot find palaver's package folder (package.json beside workspace/)");
}

/** palaver's version, from its package.json. */
export function palaverVersion(): string {
  const pkg = JSON.parse(readFileSync(join(packageRoot(), "package.json"), "utf8")) as { version: string };
  return pkg.version;
}
