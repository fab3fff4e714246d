import { existsSync } from "node:fs";
import { chmod, mkdir, mkdtemp, readFile, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { newConfigText } from "../../src/cli/onboard.js";
import { createWorkspace } from "../../src/config/workspace.js";
import { ConfigSchema } from "../../src/config/schema.js";

let dir: string;
let templates: string;
let workspace: string;

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), "palaver-onboard-"));
  templates = join(dir, "templates");
  workspace = join(dir, "ws");
  await mkdir(join(templates, "memory"), { recursive: true });
  await mkdir(join(templates, "skills", "weather"), { recursive: true });
  await writeFile(join(templates, "AGENTS.md"), "agents template");
  await writeFile(join(templates, "SOUL.md"), "soul template");
  await writeFile(join(templates, "memory", "MEMORY.md"), "memory template");
  await writeFile(join(templates, "skills", "weather", "SKILL.md"), "built-in skill");
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe("createWorkspace", () => {
  it("creates owner-only files and folders (issue 11), leaving existing ones alone", async () => {
    const mode = async (path: string) => (await stat(path)).mode & 0o777;
    await mkdir(workspace, { mode: 0o755 });
    await chmod(workspace, 0o755);
    await writeFile(join(workspace, "SOUL.md"), "mine", { mode: 0o644 });
    await chmod(join(workspace, "SOUL.md"), 0o644);
    createWorkspace(workspace, templates);
    for (const file of ["AGENTS.md", join("memory", "MEMORY.md")]) {
      expect(await mode(join(workspace, file))).toBe(0o600);
    }
    for (const sub of ["skills", "sessions", "memory", "media"]) {
      expect(await mode(join(workspace, sub))).toBe(0o700);
    }
    // What the user made is theirs to decide.
    expect(await mode(join(workspace, "SOUL.md"))).toBe(0o644);
    expect(await mode(workspace)).toBe(0o755);

    const fresh = join(dir, "fresh");
    createWorkspace(fresh, templates);
    expect(await mode(fresh)).toBe(0o700);
  });

  it("copies the templates except skills/ and creates skills/, sessions/ and memory/", async () => {
    const setup = createWorkspace(workspace, templates);
    expect(setup.created.sort()).toEqual(["AGENTS.md", "SOUL.md", join("memory", "MEMORY.md")].sort());
    expect(setup.kept).toEqual([]);
    expect(await readFile(join(workspace, "SOUL.md"), "utf8")).toBe("soul template");
    expect(await readFile(join(workspace, "memory", "MEMORY.md"), "utf8")).toBe("memory template");
    for (const sub of ["skills", "sessions", "memory"]) expect(existsSync(join(workspace, sub))).toBe(true);
    expect(existsSync(join(workspace, "skills", "weather"))).toBe(false);
  });

  it("never overwrites a file the user already has", async () => {
    await mkdir(join(workspace, "memory"), { recursive: true });
    await writeFile(join(workspace, "SOUL.md"), "my own soul");
    await writeFile(join(workspace, "memory", "MEMORY.md"), "my memories");
    const setup = createWorkspace(workspace, templates);
    expect(setup.created).toEqual(["AGENTS.md"]);
    expect(setup.kept.sort()).toEqual(["SOUL.md", join("memory", "MEMORY.md")].sort());
    expect(await readFile(join(workspace, "SOUL.md"), "utf8")).toBe("my own soul");
    expect(await readFile(join(workspace, "memory", "MEMORY.md"), "utf8")).toBe("my memories");

    const again = createWorkspace(workspace, templates);
    expect(again.created).toEqual([]);
    expect(again.kept).toHaveLength(3);
  });

  it("still creates the folders when the template folder is missing", () => {
    const setup = createWorkspace(workspace, join(dir, "nowhere"));
    expect(setup).toEqual({ created: [], kept: [] });
    expect(existsSync(join(workspace, "sessions"))).toBe(true);
  });
});

describe("newConfigText", () => {
  it("holds the keys a newcomer edits, at their defaults, and nothing unsupported (issues 13, 35)", () => {
    const defaults = ConfigSchema.parse({});
    expect(JSON.parse(newConfigText())).toEqual({
      agents: {
        defaults: { provider: defaults.agents.defaults.provider, model: defaults.agents.defaults.model },
      },
      providers: { openai: { apiKey: "" } },
      channels: { telegram: { enabled: false, token: "", allowFrom: [] } },
    });
    const withWs = JSON.parse(newConfigText("/srv/palaver/ws")) as { agents: { defaults: object } };
    expect(withWs.agents.defaults).toMatchObject({ workspace: "/srv/palaver/ws" });
    // Nothing unsupported is offered: tools.web.proxy is accepted but not implemented.
    expect(newConfigText()).not.toContain("proxy");
  });

  it("loads as the defaults (plus the chosen workspace and the empty key slot)", () => {
    const loaded = ConfigSchema.parse(JSON.parse(newConfigText()));
    const defaults = ConfigSchema.parse({});
    expect({ ...loaded, providers: {} }).toEqual(defaults);
    expect(Object.keys(loaded.providers)).toEqual(["openai"]);
    const withWs = ConfigSchema.parse(JSON.parse(newConfigText("/srv/palaver/ws")));
    expect(withWs.agents.defaults.workspace).toBe("/srv/palaver/ws");
  });
});
