/**
 * Skills: `skills/NAME/SKILL.md` files that teach the agent a task. The prompt
 * lists them (name, description, where to read them, whether they can run
 * here); skills marked `always` have their body put in the prompt whole.
 * A workspace skill overrides a built-in one of the same name.
 *
 * Frontmatter follows nanobot (and openclaw): name, description, always, and
 * `metadata` — often a JSON string such as
 * `{"nanobot":{"requires":{"bins":["gh"],"env":["GITHUB_TOKEN"]},"always":true}}`.
 */
import { accessSync, constants, statSync } from "node:fs";
import { readFile, readdir, stat } from "node:fs/promises";
import { delimiter, join } from "node:path";
import * as z from "zod";
import { PalaverError, errorMessage } from "../util/errors.js";

export interface SkillRequirements {
  bins: string[];
  env: string[];
}

export interface Skill {
  /** The folder name (nanobot's rule), which is what the user and the model refer to. */
  name: string;
  description: string;
  /** Absolute path of SKILL.md. */
  path: string;
  source: "workspace" | "builtin";
  always: boolean;
  requires: SkillRequirements;
  /** Requirements not met on this machine; both empty when the skill is available. */
  missing: SkillRequirements;
  available: boolean;
  /** SKILL.md without its frontmatter, trimmed. */
  body: string;
  /** Changes whenever SKILL.md changes (inode, size, mtime): lets callers cache what they build from it. */
  version: string;
  frontmatter: Record<string, unknown>;
}

// ---------------------------------------------------------------------------
// Frontmatter: a tiny YAML subset, enough for SKILL.md files in the wild.

export interface ParsedMarkdown {
  data: Record<string, unknown>;
  body: string;
}

const FRONTMATTER = /^\uFEFF?---[ \t]*\r?\n(?:([\s\S]*?)\r?\n)?---[ \t]*(?:\r?\n|$)/;
/** Bounds nesting of mappings so a pathological file cannot recurse deeply. */
const MAX_DEPTH = 8;

/**
 * Splits `---` frontmatter from the markdown and parses it: `key: value`
 * lines, quoted strings, booleans, numbers, null, JSON objects/arrays, flow
 * lists `[a, b]`, `- item` lists, indented mappings and `|`/`>` blocks.
 * Text without frontmatter comes back whole with empty data.
 */
export function parseFrontmatter(text: string): ParsedMarkdown {
  const m = FRONTMATTER.exec(text);
  if (!m) return { data: {}, body: text.replace(/^\uFEFF/, "") };
  const lines = (m[1] ?? "").split(/\r?\n/);
  return { data: parseMapping(lines, 0), body: text.slice(m[0].length) };
}

const indentOf = (line: string): number => line.length - line.trimStart().length;
const isBlank = (line: string): boolean => line.trim() === "" || line.trimStart().startsWith("#");

function parseMapping(lines: string[], depth: number): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  let i = 0;
  while (i < lines.length) {
    const line = lines[i]!;
    i++;
    if (isBlank(line) || indentOf(line) > 0) continue; // stray indented lines: ignored
    const colon = line.indexOf(":");
    if (colon <= 0) continue;
    const key = unquote(line.slice(0, colon).trim());
    const rest = line.slice(colon + 1).trim();
    // Lines belonging to this key: indented ones, or "- " items at column 0.
    const start = i;
    while (
      i < lines.length &&
      (isBlank(lines[i]!) || indentOf(lines[i]!) > 0 || /^-(\s|$)/.test(lines[i]!))
    ) {
      i++;
    }
    const child = lines.slice(start, i);
    const more = child.filter((l) => !isBlank(l)).map((l) => l.trim());
    if (/^[|>][+-]?$/.test(rest)) out[key] = blockScalar(child, rest.startsWith(">"), rest.endsWith("-"));
    else if (rest === "") out[key] = nested(child, depth);
    // A JSON/flow value may continue on indented lines; so may a plain string.
    else if (/^[{[]/.test(rest)) out[key] = scalar([rest, ...more].join("\n"));
    else if (/^["']/.test(rest)) out[key] = scalar(rest);
    else out[key] = scalar([rest, ...more].join(" "));
  }
  return out;
}

function nested(lines: string[], depth: number): unknown {
  const content = lines.filter((l) => !isBlank(l));
  if (content.length === 0 || depth >= MAX_DEPTH) return null;
  const indent = Math.min(...content.map(indentOf));
  const dedented = lines.map((l) => (isBlank(l) ? "" : l.slice(indent)));
  // openclaw writes metadata as an indented multi-line flow mapping.
  if (/^[{[]/.test(content[0]!.trimStart())) return scalar(content.map((l) => l.trim()).join("\n"));
  if (content.every((l) => /^-(\s|$)/.test(l.trimStart()))) {
    return content.map((l) => scalar(l.trimStart().slice(1).trim()));
  }
  return parseMapping(dedented, depth + 1);
}

function blockScalar(lines: string[], folded: boolean, strip: boolean): string {
  const content = lines.filter((l) => l.trim() !== "");
  const indent = content.length ? Math.min(...content.map(indentOf)) : 0;
  const raw = lines.map((l) => l.slice(Math.min(indent, indentOf(l))));
  while (raw.length && raw.at(-1) === "") raw.pop();
  const text = folded ? raw.join("\n").replace(/([^\n])\n(?!\n)/g, "$1 ") : raw.join("\n");
  return strip ? text : `${text}\n`;
}

function unquote(s: string): string {
  if (s.length >= 2 && ((s.startsWith('"') && s.endsWith('"')) || (s.startsWith("'") && s.endsWith("'")))) {
    return String(scalar(s));
  }
  return s;
}

function scalar(raw: string): unknown {
  const s = raw.trim();
  if (s.startsWith('"')) {
    const end = s.lastIndexOf('"');
    const quoted = end > 0 ? s.slice(0, end + 1) : `${s}"`;
    try {
      return JSON.parse(quoted) as unknown;
    } catch {
      return quoted.slice(1, -1);
    }
  }
  if (s.startsWith("'")) {
    const end = s.lastIndexOf("'");
    return (end > 0 ? s.slice(1, end) : s.slice(1)).replace(/''/g, "'");
  }
  if (s.startsWith("{") || s.startsWith("[")) {
    for (const candidate of [s, s.replace(/,(\s*[}\]])/g, "$1")]) {
      try {
        return JSON.parse(candidate) as unknown;
      } catch {
        // try the next form: YAML flow style allows trailing commas
      }
    }
    // YAML flow list with bare words: [gh, git]
    if (s.startsWith("[") && s.endsWith("]")) {
      const inner = s.slice(1, -1).trim();
      return inner === "" ? [] : inner.split(",").map((part) => scalar(part));
    }
    return s;
  }
  const plain = s.replace(/\s+#.*$/, "");
  const lower = plain.toLowerCase();
  // PyYAML (YAML 1.1) reads yes/no/on/off as booleans too.
  if (["true", "yes", "on"].includes(lower)) return true;
  if (["false", "no", "off"].includes(lower)) return false;
  if (lower === "" || lower === "null" || lower === "~") return null;
  if (/^-?\d+(\.\d+)?$/.test(plain)) return Number(plain);
  return plain;
}

// ---------------------------------------------------------------------------
// Requirements

const stringList = z.preprocess((v) => (typeof v === "string" ? [v] : v), z.array(z.string()).catch([]));
const RequiresSchema = z.object({ bins: stringList.default([]), env: stringList.default([]) });

function asObject(v: unknown): Record<string, unknown> | undefined {
  if (typeof v === "string") {
    try {
      v = JSON.parse(v) as unknown;
    } catch {
      return undefined;
    }
  }
  return typeof v === "object" && v !== null && !Array.isArray(v)
    ? (v as Record<string, unknown>)
    : undefined;
}

/** The palaver/nanobot/openclaw block of `metadata` (a JSON string or a mapping). */
function agentMetadata(frontmatter: Record<string, unknown>): Record<string, unknown> {
  const meta = asObject(frontmatter.metadata) ?? {};
  return asObject(meta.palaver) ?? asObject(meta.nanobot) ?? asObject(meta.openclaw) ?? {};
}

function requirementsOf(frontmatter: Record<string, unknown>): SkillRequirements {
  const raw = agentMetadata(frontmatter).requires ?? frontmatter.requires;
  const parsed = RequiresSchema.safeParse(raw ?? {});
  return parsed.success ? parsed.data : { bins: [], env: [] };
}

/** How long a PATH lookup is trusted: installing a tool shows up within this time. */
const BIN_CACHE_MS = 30_000;
const binCache = new Map<string, { found: boolean; at: number }>();

function isExecutableFile(path: string): boolean {
  try {
    accessSync(path, constants.X_OK);
    return statSync(path).isFile();
  } catch {
    return false;
  }
}

/** Whether `bin` is an executable on PATH, found by looking at the folders (nothing is run). */
export function onPath(bin: string, env: NodeJS.ProcessEnv = process.env): boolean {
  const pathVar = env.PATH ?? "";
  const cacheKey = `${pathVar}\0${bin}`;
  const hit = binCache.get(cacheKey);
  if (hit && Date.now() - hit.at < BIN_CACHE_MS) return hit.found;
  let found: boolean;
  if (bin.includes("/") || bin.includes("\\")) {
    found = isExecutableFile(bin);
  } else {
    const exts = process.platform === "win32" ? ["", ...(env.PATHEXT ?? ".EXE;.CMD;.BAT").split(";")] : [""];
    found = pathVar
      .split(delimiter)
      .filter((dir) => dir !== "")
      .some((dir) => exts.some((ext) => isExecutableFile(join(dir, bin + ext))));
  }
  binCache.set(cacheKey, { found, at: Date.now() });
  return found;
}

function missingOf(req: SkillRequirements, env: NodeJS.ProcessEnv): SkillRequirements {
  return {
    bins: req.bins.filter((b) => !onPath(b, env)),
    env: req.env.filter((name) => !env[name]),
  };
}

// ---------------------------------------------------------------------------
// Loader

interface ParsedSkill {
  description: string;
  always: boolean;
  requires: SkillRequirements;
  body: string;
  frontmatter: Record<string, unknown>;
}

interface CacheEntry {
  version: string;
  parsed: ParsedSkill;
}

/** Skill folders looked at per root: a bound, not a limit anyone should meet. */
const MAX_SKILLS_PER_ROOT = 500;

function parseSkill(name: string, text: string): ParsedSkill {
  const { data, body } = parseFrontmatter(text);
  const description =
    typeof data.description === "string" && data.description.trim() ? data.description : name;
  return {
    description: description.trim().replace(/\s+/g, " "),
    always: data.always === true || agentMetadata(data).always === true,
    requires: requirementsOf(data),
    body: body.trim(),
    frontmatter: data,
  };
}

export class SkillsLoader {
  private readonly cache = new Map<string, CacheEntry>();
  private last: Skill[] = [];

  constructor(
    readonly workspace: string,
    readonly builtinDir?: string,
    private readonly env: NodeJS.ProcessEnv = process.env,
  ) {}

  get workspaceDir(): string {
    return join(this.workspace, "skills");
  }

  /**
   * Every skill, sorted by name (so the prompt is stable), workspace skills
   * replacing built-in ones of the same name. Unchanged files are not re-read.
   */
  async list(): Promise<Skill[]> {
    const [own, builtin] = await Promise.all([
      this.scan(this.workspaceDir, "workspace"),
      this.builtinDir ? this.scan(this.builtinDir, "builtin") : Promise.resolve([]),
    ]);
    const byName = new Map<string, Skill>();
    for (const skill of [...builtin, ...own]) byName.set(skill.name, skill);
    this.last = [...byName.values()].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    return this.last;
  }

  /** Skills whose body goes into every prompt: marked always and able to run here. */
  async alwaysSkills(): Promise<Skill[]> {
    return (await this.list()).filter((s) => s.always && s.available);
  }

  /**
   * The skills list for the system prompt. Uses `skills` when given, else the
   * result of the last list(). Names in `exclude` (e.g. always-on skills whose
   * body is already in the prompt) are left out.
   */
  summary(skills: readonly Skill[] = this.last, exclude: ReadonlySet<string> = new Set()): string {
    const shown = skills.filter((s) => !exclude.has(s.name));
    if (shown.length === 0) return "";
    const lines = ["<skills>"];
    for (const s of shown) {
      lines.push(`  <skill available="${s.available}">`);
      lines.push(`    <name>${xml(s.name)}</name>`);
      lines.push(`    <description>${xml(s.description)}</description>`);
      lines.push(`    <location>${xml(s.path)}</location>`);
      if (!s.available) {
        const missing = [...s.missing.bins.map((b) => `CLI: ${b}`), ...s.missing.env.map((e) => `ENV: ${e}`)];
        lines.push(`    <requires>${xml(missing.join(", "))}</requires>`);
      }
      lines.push("  </skill>");
    }
    lines.push("</skills>");
    return lines.join("\n");
  }

  /** A skill's markdown without frontmatter, or null when there is no such skill. */
  async loadBody(name: string): Promise<string | null> {
    return (await this.list()).find((s) => s.name === name)?.body ?? null;
  }

  private async scan(root: string, source: Skill["source"]): Promise<Skill[]> {
    let names: string[];
    try {
      names = await readdir(root);
    } catch (err) {
      if (isErrno(err, "ENOENT") || isErrno(err, "ENOTDIR")) return [];
      throw new PalaverError(`cannot list skills in ${root}: ${errorMessage(err)}`, { cause: err });
    }
    const candidates = names.filter((n) => !n.startsWith(".")).slice(0, MAX_SKILLS_PER_ROOT);
    const skills = await Promise.all(
      candidates.map((name) => this.load(name, join(root, name, "SKILL.md"), source)),
    );
    return skills.filter((s): s is Skill => s !== undefined);
  }

  private async load(name: string, path: string, source: Skill["source"]): Promise<Skill | undefined> {
    let parsed: ParsedSkill;
    let version: string;
    try {
      const st = await stat(path);
      if (!st.isFile()) return undefined;
      version = `${st.ino}:${st.size}:${st.mtimeMs}`;
      const hit = this.cache.get(path);
      if (hit && hit.version === version) {
        parsed = hit.parsed;
      } else {
        parsed = parseSkill(name, await readFile(path, "utf8"));
        this.cache.set(path, { version, parsed });
      }
    } catch (err) {
      // A folder without SKILL.md is not a skill; a vanished file is simply gone.
      if (isErrno(err, "ENOENT") || isErrno(err, "ENOTDIR")) {
        this.cache.delete(path);
        return undefined;
      }
      throw new PalaverError(`cannot read skill ${path}: ${errorMessage(err)}`, { cause: err });
    }
    const missing = missingOf(parsed.requires, this.env);
    return {
      name,
      description: parsed.description,
      path,
      source,
      always: parsed.always,
      requires: parsed.requires,
      missing,
      available: missing.bins.length === 0 && missing.env.length === 0,
      body: parsed.body,
      version,
      frontmatter: parsed.frontmatter,
    };
  }
}

function xml(s: string): string {
  return s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
}

function isErrno(err: unknown, code: string): boolean {
  return typeof err === "object" && err !== null && (err as { code?: unknown }).code === code;
}
