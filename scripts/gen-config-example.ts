/**
 * Writes config.example.json from the schema defaults, so the example can never
 * drift from them (tests/config/example.test.ts checks it).
 *
 *   npx tsx scripts/gen-config-example.ts [OUTPUT]   (default: config.example.json at the repo root)
 */
import { writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { exampleConfig } from "../src/config/load.js";

export const EXAMPLE_PATH = join(dirname(fileURLToPath(import.meta.url)), "..", "config.example.json");

export function renderConfigExample(): string {
  return `${JSON.stringify(exampleConfig(), null, 2)}\n`;
}

const invokedDirectly =
  process.argv[1] !== undefined && resolve(process.argv[1]) === fileURLToPath(import.meta.url);
if (invokedDirectly) {
  const out = resolve(process.argv[2] ?? EXAMPLE_PATH);
  writeFileSync(out, renderConfigExample());
  process.stdout.write(`wrote ${out}\n`);
}
