/**
 * The oldest Node palaver runs on: 22.13, the first 22.x with node:sqlite unflagged. package.json's
 * `engines.node` says the same (tests/util/node-version.test.ts holds them together). This module
 * imports nothing, so the entry can check before it loads code an older Node may not parse.
 */
export const MINIMUM_NODE = "22.13.0";

/** What to tell someone running palaver on `version` (process.versions.node), or null when it is new enough. */
export function unsupportedNodeMessage(version: string, minimum = MINIMUM_NODE): string | null {
  const have = numbers(version);
  const need = numbers(minimum);
  for (let i = 0; i < need.length; i++) {
    if ((have[i] ?? 0) > need[i]!) return null;
    if ((have[i] ?? 0) < need[i]!) {
      return `palaver needs Node.js ${minimum} or newer; this is Node.js ${version} (install a current LTS from https://nodejs.org)`;
    }
  }
  return null;
}

/** "22.13.0" → [22, 13, 0]; a part that is not a number counts as 0. */
function numbers(version: string): number[] {
  return version
    .replace(/^v/, "")
    .split(".")
    .map((part) => Number.parseInt(part, 10) || 0);
}
