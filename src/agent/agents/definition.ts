/**
 * One named agent file, `<workspace>/agents/<name>.md`: front-matter (name, description, model,
 * tools, maxIterations, skills) and a body, the agent's instructions. Pure: text in, a definition
 * or the problems (with their line) out. The front-matter is read by the same parser as SKILL.md
 * (agent/skills.ts), so both kinds of file accept the same YAML.
 */
import * as z from "zod";
import { parseFrontmatter } from "../skills.js";

export interface AgentDefinition {
  name: string;
  /** One line the main agent sees, saying what this agent is for. */
  description: string;
  /** The model it runs on; absent: the utility model (a delegate or subagent) or the main model. */
  model?: string;
  /** Tool names or globs it may use (`mcp_github_*`, `delegate:researcher`); absent: the default set. */
  tools?: string[];
  maxIterations?: number;
  /** Skills whose instructions are put into its prompt. */
  skills: string[];
  /** The body: what the agent is told to be and do. */
  instructions: string;
  /** Absolute path of the file. */
  path: string;
}

/** What is wrong with a file, where: `agents/x.md:3: tools: expected a list of tool names`. */
export interface AgentProblem {
  path: string;
  line: number;
  message: string;
}

/** An agent's name: what `delegate`, `spawn`, bindings and `/agent` refer to it by. */
const NAME = /^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$/;
export const MAX_AGENT_ITERATIONS = 200;

/** YAML lets a list be written `[a, b]`, `- a` lines or (Claude Code's agent files) `a, b`. */
const nameList = z.preprocess(
  (v) =>
    typeof v === "string"
      ? v
          .split(",")
          .map((s) => s.trim())
          .filter((s) => s !== "")
      : v,
  z.array(z.string().min(1), { error: "expected a list of names" }),
);

const FrontMatter = z.object({
  name: z.string().regex(NAME, "letters, digits, - and _ only (at most 64)").optional(),
  description: z.string({ error: "missing: one line saying what this agent is for" }).trim().min(1, {
    error: "missing: one line saying what this agent is for",
  }),
  model: z.string().trim().min(1).optional(),
  tools: nameList.optional(),
  maxIterations: z.number().int().min(1).max(MAX_AGENT_ITERATIONS).optional(),
  skills: nameList.default([]),
});

/** The front-matter's keys may be null in YAML (`model:` with nothing after it): same as absent. */
function withoutNulls(data: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(data).filter(([, v]) => v !== null));
}

/** `fileName` without `.md` is the default name. */
export function parseAgentFile(
  path: string,
  fileName: string,
  text: string,
): { agent: AgentDefinition } | { problems: AgentProblem[] } {
  const problem = (line: number, message: string) => ({ problems: [{ path, line, message }] });
  if (/^\uFEFF?---[ \t]*\r?\n/.test(text) && !/\r?\n---[ \t]*(\r?\n|$)/.test(text)) {
    return problem(1, "the front-matter is not closed by a --- line");
  }
  const { data, body } = parseFrontmatter(text);
  const parsed = FrontMatter.safeParse(withoutNulls(data));
  if (!parsed.success) {
    return {
      problems: parsed.error.issues.map((issue) => {
        const key = String(issue.path[0] ?? "");
        return { path, line: lineOfKey(text, key), message: `${key || "front-matter"}: ${issue.message}` };
      }),
    };
  }
  const fm = parsed.data;
  const name = fm.name ?? fileName.replace(/\.md$/i, "");
  if (!NAME.test(name)) {
    return problem(1, `the file name "${fileName}" is not a valid agent name: add name: to the front-matter`);
  }
  const instructions = body.trim();
  if (instructions === "") return problem(lineCount(text), "the body (the agent's instructions) is empty");
  return {
    agent: {
      name,
      description: fm.description.replace(/\s+/g, " "),
      ...(fm.model ? { model: fm.model } : {}),
      ...(fm.tools ? { tools: fm.tools } : {}),
      ...(fm.maxIterations ? { maxIterations: fm.maxIterations } : {}),
      skills: fm.skills,
      instructions,
      path,
    },
  };
}

/** The 1-based line of `key:` in the front-matter (the opening `---` is line 1), else 1. */
function lineOfKey(text: string, key: string): number {
  if (!key) return 1;
  const lines = text.split(/\r?\n/);
  for (let i = 1; i < lines.length && !/^---[ \t]*$/.test(lines[i]!); i++) {
    if (lines[i]!.startsWith(`${key}:`)) return i + 1;
  }
  return 1;
}

function lineCount(text: string): number {
  return text.split(/\r?\n/).length;
}

/** `path:line: message`, the way compilers point at a line. */
export function formatProblem(p: AgentProblem): string {
  return `${p.path}:${p.line}: ${p.message}`;
}
