import { spawn } from "node:child_process";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { EXAMPLE_PATH, renderConfigExample } from "../../scripts/gen-config-example.js";
import { loadConfig } from "../../src/config/load.js";
import { ConfigSchema, defaultConfig } from "../../src/config/schema.js";

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..", "..");
const TSX = pathToFileURL(join(ROOT, "node_modules", "tsx", "dist", "loader.mjs")).href;

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), "palaver-example-"));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

function runScript(out: string): Promise<number | null> {
  return new Promise((resolve, reject) => {
    const child = spawn(
      process.execPath,
      ["--import", TSX, join(ROOT, "scripts", "gen-config-example.ts"), out],
      {
        cwd: dir,
        stdio: "ignore",
        timeout: 15_000,
      },
    );
    child.on("error", reject);
    child.on("exit", (code) => resolve(code));
  });
}

describe("config.example.json", () => {
  it("is exactly what scripts/gen-config-example.ts writes (run it after changing the schema)", async () => {
    expect(EXAMPLE_PATH).toBe(join(ROOT, "config.example.json"));
    const committed = await readFile(EXAMPLE_PATH, "utf8");
    expect(committed).toBe(renderConfigExample());

    const out = join(dir, "example.json");
    expect(await runScript(out)).toBe(0);
    expect(await readFile(out, "utf8")).toBe(committed);
  });

  it("holds the schema defaults plus one example provider, and loads without warnings", async () => {
    const example = JSON.parse(await readFile(EXAMPLE_PATH, "utf8")) as Record<string, unknown>;
    expect(example.providers).toEqual({ openai: { apiKey: "", apiBase: null, extraHeaders: null } });
    // channels.web.enabled is left out ("on while no other platform is"): read back, it is the default.
    expect((example.channels as { web: object }).web).not.toHaveProperty("enabled");
    expect(ConfigSchema.parse({ ...example, providers: {} })).toEqual(defaultConfig());

    const loaded = loadConfig({
      configPath: EXAMPLE_PATH,
      env: {},
      cwd: dir,
      workspace: dir,
      loadDotenv: false,
    });
    expect(loaded.warnings).toEqual([]);
  });
});
