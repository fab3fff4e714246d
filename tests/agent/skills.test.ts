import { chmod, mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { SkillsLoader, onPath, parseFrontmatter } from "../../src/agent/skills.js";
import { builtinSkillsDir } from "../../src/config/paths.js";

describe("parseFrontmatter", () => {
  it("reads nanobot's frontmatter with metadata as a JSON string", () => {
    const text = [
      "---",
      "name: github",
      'description: "Interact with GitHub using the `gh` CLI: issues, PRs, runs."',
      'metadata: {"nanobot":{"emoji":"🐙","requires":{"bins":["gh"],"env":["GITHUB_TOKEN"]},"always":true}}',
      "---",
      "",
      "# GitHub",
      "",
      "Use gh.",
    ].join("\n");
    const { data, body } = parseFrontmatter(text);
    expect(data).toEqual({
      name: "github",
      description: "Interact with GitHub using the `gh` CLI: issues, PRs, runs.",
      metadata: { nanobot: { emoji: "🐙", requires: { bins: ["gh"], env: ["GITHUB_TOKEN"] }, always: true } },
    });
    expect(body).toBe("\n# GitHub\n\nUse gh.");
  });

  it("reads scalars, lists, nested mappings and block strings", () => {
    const text = [
      "---",
      "# a comment",
      "name: 'it''s'",
      "always: true",
      "hidden: no",
      "count: 3",
      "nothing: ~",
      "tags: [gh, git]",
      "items:",
      "  - one",
      "  - 'two'",
      "requires:",
      "  bins: [curl]",
      "  env:",
      "    - API_KEY",
      "long: >",
      "  folded over",
      "  two lines",
      "script: |",
      "  line 1",
      "  line 2",
      "plain: wraps onto",
      "  the next line # and a comment",
      "---",
      "body",
    ].join("\r\n");
    const { data, body } = parseFrontmatter(text);
    expect(data).toEqual({
      name: "it's",
      always: true,
      hidden: false,
      count: 3,
      nothing: null,
      tags: ["gh", "git"],
      items: ["one", "two"],
      requires: { bins: ["curl"], env: ["API_KEY"] },
      long: "folded over two lines\n",
      script: "line 1\nline 2\n",
      plain: "wraps onto the next line",
    });
    expect(body).toBe("body");
  });

  it("reads openclaw's multi-line flow mapping with trailing commas", () => {
    const text = [
      "---",
      "name: tmux",
      "metadata:",
      "  {",
      '    "openclaw":',
      '      { "emoji": "🧵", "requires": { "bins": ["tmux"] }, },',
      "  }",
      "---",
      "x",
    ].join("\n");
    expect(parseFrontmatter(text).data.metadata).toEqual({
      openclaw: { emoji: "🧵", requires: { bins: ["tmux"] } },
    });
  });

  it("returns the text whole when there is no frontmatter", () => {
    expect(parseFrontmatter("# Title\n\ntext")).toEqual({ data: {}, body: "# Title\n\ntext" });
    expect(parseFrontmatter("---\n---\nbody")).toEqual({ data: {}, body: "body" });
  });
});

let root: string;
let workspace: string;
let builtin: string;

async function skill(base: string, name: string, text: string): Promise<string> {
  await mkdir(join(base, name), { recursive: true });
  const path = join(base, name, "SKILL.md");
  await writeFile(path, text);
  return path;
}

beforeEach(async () => {
  root = await mkdtemp(join(tmpdir(), "palaver-skills-"));
  workspace = join(root, "ws");
  builtin = join(root, "builtin");
  await mkdir(join(workspace, "skills"), { recursive: true });
  await mkdir(builtin, { recursive: true });
});
afterEach(async () => {
  await rm(root, { recursive: true, force: true });
});

describe("SkillsLoader", () => {
  it("lists skills sorted by name; a workspace skill overrides the built-in one", async () => {
    await skill(builtin, "weather", "---\nname: weather\ndescription: Built-in weather\n---\nbuiltin body");
    await skill(builtin, "cron", "---\ndescription: Schedule things\n---\ncron body");
    const own = await skill(
      join(workspace, "skills"),
      "weather",
      "---\ndescription: My weather\n---\nmy body",
    );
    await mkdir(join(workspace, "skills", "not-a-skill")); // no SKILL.md: ignored

    const loader = new SkillsLoader(workspace, builtin);
    const skills = await loader.list();
    expect(skills.map((s) => [s.name, s.source])).toEqual([
      ["cron", "builtin"],
      ["weather", "workspace"],
    ]);
    const weather = skills[1]!;
    expect(weather).toMatchObject({ description: "My weather", path: own, body: "my body", available: true });
    expect(await loader.loadBody("weather")).toBe("my body");
    expect(await loader.loadBody("cron")).toBe("cron body");
    expect(await loader.loadBody("nope")).toBeNull();
  });

  it("shows unmet requirements in the summary and keeps such skills out of alwaysSkills", async () => {
    const env = { PATH: join(root, "bin"), HAVE_IT: "1" };
    await mkdir(join(root, "bin"));
    await writeFile(join(root, "bin", "present-tool"), "#!/bin/sh\n");
    await chmod(join(root, "bin", "present-tool"), 0o755);
    await skill(
      builtin,
      "github",
      '---\ndescription: GitHub <via> gh & co\nmetadata: {"nanobot":{"requires":{"bins":["palaver-missing-bin"],"env":["MISSING_TOKEN","HAVE_IT"]},"always":true}}\n---\nbody',
    );
    await skill(
      builtin,
      "ok",
      '---\ndescription: Fine\nalways: true\nmetadata: {"palaver":{"requires":{"bins":["present-tool"],"env":["HAVE_IT"]}}}\n---\nok body',
    );
    await skill(
      builtin,
      "top",
      "---\ndescription: Top-level requires\nrequires:\n  env: [MISSING_TOKEN]\n---\n",
    );

    const loader = new SkillsLoader(workspace, builtin, env);
    const skills = await loader.list();
    const gh = skills.find((s) => s.name === "github")!;
    expect(gh.available).toBe(false);
    expect(gh.always).toBe(true);
    expect(gh.missing).toEqual({ bins: ["palaver-missing-bin"], env: ["MISSING_TOKEN"] });
    expect(skills.find((s) => s.name === "ok")!.available).toBe(true);
    expect(skills.find((s) => s.name === "top")!.missing).toEqual({ bins: [], env: ["MISSING_TOKEN"] });

    expect((await loader.alwaysSkills()).map((s) => s.name)).toEqual(["ok"]);

    const summary = loader.summary(skills);
    expect(summary).toContain('<skill available="false">\n    <name>github</name>');
    expect(summary).toContain("<description>GitHub &lt;via&gt; gh &amp; co</description>");
    expect(summary).toContain(`<location>${join(builtin, "github", "SKILL.md")}</location>`);
    expect(summary).toContain("<requires>CLI: palaver-missing-bin, ENV: MISSING_TOKEN</requires>");
    expect(summary).toContain('<skill available="true">\n    <name>ok</name>');
    expect(summary.match(/<requires>/g)).toHaveLength(2); // github and top, not ok
    expect(loader.summary(skills, new Set(["ok"]))).not.toContain("<name>ok</name>");
    expect(loader.summary()).toBe(summary); // the last list() by default
  });

  it("re-reads a SKILL.md only when it changed", async () => {
    const path = await skill(builtin, "notes", "---\ndescription: First\n---\nv1");
    const loader = new SkillsLoader(workspace, builtin);
    const first = (await loader.list())[0]!;
    expect(first.description).toBe("First");
    expect((await loader.list())[0]!.version).toBe(first.version);
    await writeFile(path, "---\ndescription: Second version\n---\nv2");
    const second = (await loader.list())[0]!;
    expect(second.description).toBe("Second version");
    expect(second.body).toBe("v2");
    expect(second.version).not.toBe(first.version);
    await rm(join(builtin, "notes"), { recursive: true });
    expect(await loader.list()).toEqual([]);
  });

  it("falls back to the folder name as description and copes with missing folders", async () => {
    await skill(join(workspace, "skills"), "bare", "Just text, no frontmatter.");
    const loader = new SkillsLoader(workspace, join(root, "does-not-exist"));
    const [bare] = await loader.list();
    expect(bare).toMatchObject({
      name: "bare",
      description: "bare",
      body: "Just text, no frontmatter.",
      always: false,
    });
    expect(await new SkillsLoader(join(root, "nowhere")).list()).toEqual([]);
  });

  it("finds executables on PATH without running them", async () => {
    const bin = join(root, "bin");
    await mkdir(bin);
    await writeFile(join(bin, "tool-x"), "#!/bin/sh\nexit 1\n");
    await chmod(join(bin, "tool-x"), 0o755);
    await writeFile(join(bin, "not-exec"), "data");
    expect(onPath("tool-x", { PATH: `/nonexistent:${bin}` })).toBe(true);
    expect(onPath("not-exec", { PATH: bin })).toBe(false);
    expect(onPath("tool-x", { PATH: "/nonexistent" })).toBe(false);
    expect(onPath(join(bin, "tool-x"), { PATH: "" })).toBe(true);
  });

  it("ships a memory skill that is always on and a skill-creator skill", async () => {
    const loader = new SkillsLoader(workspace, builtinSkillsDir());
    const skills = await loader.list();
    const memory = skills.find((s) => s.name === "memory")!;
    expect(memory).toMatchObject({ always: true, available: true, source: "builtin" });
    expect(memory.body).toContain("memory/HISTORY.md");
    expect(memory.body).not.toContain("---\nname:");
    const creator = skills.find((s) => s.name === "skill-creator")!;
    expect(creator.always).toBe(false);
    expect(creator.description.length).toBeGreaterThan(20);
  });
});
