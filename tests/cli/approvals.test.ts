/**
 * `palaver approvals list|revoke` run as real child processes, with HOME and
 * PALAVER_CONFIG in a temp folder; the "gateway" is a FileChatRules in this
 * test process on the same file. Also `config check` on approval rules.
 */
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { FileChatRules } from "../../src/approvals/chat-rules.js";
import { formatRuleTable } from "../../src/cli/approvals.js";
import { approvalRulesPath } from "../../src/config/paths.js";
import { runCli, type CliResult } from "../helpers/cli.js";

/** A usable LLM needing no key: `config check` refuses a config without one before it looks at the rules, as the gateway would. */
const LOCAL_LLM = { ollama: {} };

let dir: string;
let home: string;
let configPath: string;

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), "palaver-approvals-cli-"));
  home = join(dir, "home");
  await mkdir(home);
  configPath = join(dir, "conf", "config.json");
  await mkdir(dirname(configPath));
  await writeFile(configPath, JSON.stringify({ agents: { defaults: { workspace: join(dir, "ws") } } }));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

function cli(args: string[]): Promise<CliResult> {
  return runCli(args, {
    cwd: dir,
    env: { HOME: home, PALAVER_CONFIG: configPath, PALAVER_LOG_LEVEL: "silent" },
  });
}

// Each child takes a second or more to start on a busy machine; the limit only ends a hang.
describe("palaver approvals", { timeout: 180_000 }, () => {
  it("lists the rules as a table and as JSON, and says when there are none", async () => {
    const empty = await cli(["approvals", "list"]);
    expect(empty).toMatchObject({ code: 0, stderr: "" });
    expect(empty.stdout).toMatch(/^No approval rules\./);

    const gateway = new FileChatRules(approvalRulesPath(configPath));
    const git = await gateway.add({
      channel: "telegram",
      chatId: "42",
      tool: "exec",
      program: "git",
      addedBy: "ann",
    });
    const web = await gateway.add({ channel: "slack", chatId: "C1", tool: "web_fetch", addedBy: "bob" });

    const [table, json] = await Promise.all([
      cli(["approvals", "list"]),
      cli(["approvals", "list", "--json"]),
    ]);
    expect(table).toMatchObject({ code: 0, stderr: "" });
    const lines = table.stdout.trimEnd().split("\n");
    expect(lines[0]).toMatch(/^ID\s+CHAT\s+TOOL\s+ADDED BY\s+WHEN\s+COVERS$/);
    expect(lines[1]).toMatch(
      new RegExp(
        `^${git.id}\\s+telegram:42\\s+exec\\s+ann\\s+\\d{4}-.*\\) {2}no call \\(\`git\` runs code; revoke this rule\\)$`,
      ),
    );
    expect(lines[2]).toMatch(
      new RegExp(`^${web.id}\\s+slack:C1\\s+web_fetch\\s+bob\\s+\\d{4}-.*\\) {2}every \`web_fetch\` call$`),
    );
    expect(JSON.parse(json.stdout)).toEqual([git, web]);
  });

  it("revokes a rule, and a running gateway's store sees it at its next read", async () => {
    const gateway = new FileChatRules(approvalRulesPath(configPath));
    const git = await gateway.add({
      channel: "telegram",
      chatId: "42",
      tool: "exec",
      program: "git",
      addedBy: "ann",
    });
    expect(gateway.forChat("telegram", "42")).toHaveLength(1);

    const revoked = await cli(["approvals", "revoke", git.id]);
    expect(revoked).toMatchObject({ code: 0, stderr: "" });
    expect(revoked.stdout).toBe(`Revoked rule ${git.id}: exec git is asked again in telegram:42\n`);
    expect(gateway.forChat("telegram", "42")).toEqual([]);
  });

  it("exits 1 with a clear message for an unknown id", async () => {
    const run = await cli(["approvals", "revoke", "deadbeef"]);
    expect(run.code).toBe(1);
    expect(run.stdout).toBe("");
    expect(run.stderr).toBe(
      "palaver: no approval rule with id deadbeef (`palaver approvals list` shows them)\n",
    );
  });

  it("is registered in palaver's own CLI", async () => {
    const run = await runCli(["approvals", "list", "--config", configPath], {
      cwd: dir,
      env: { HOME: home, PALAVER_LOG_LEVEL: "silent" },
    });
    expect(run).toMatchObject({ code: 0, stderr: "" });
    expect(run.stdout).toMatch(/^No approval rules\./);
  });
});

describe("palaver config check on tools.approval.rules", { timeout: 180_000 }, () => {
  it("exits 78 for a bad regex, an unknown action and `arg` without `match`", async () => {
    await writeFile(
      configPath,
      JSON.stringify({
        tools: {
          approval: {
            rules: [
              { tool: "exec", arg: "command", match: "rm (", action: "deny" },
              { tool: "exec", action: "maybe" },
            ],
          },
        },
      }),
    );
    const schemaErrors = await cli(["config", "check"]);
    expect(schemaErrors.code).toBe(78);
    expect(schemaErrors.stderr).toMatch(/tools\.approval\.rules\[0\]\.match: not a valid regular expression/);
    expect(schemaErrors.stderr).toMatch(
      /tools\.approval\.rules\[1\]\.action: expected one of "allow", "ask", "deny"/,
    );

    await writeFile(
      configPath,
      JSON.stringify({
        providers: LOCAL_LLM,
        tools: { approval: { rules: [{ tool: "exec", arg: "command", action: "deny" }] } },
      }),
    );
    const argOnly = await cli(["config", "check"]);
    expect(argOnly.code).toBe(78);
    expect(argOnly.stderr).toContain('tools.approval.rules[0]: "arg" (command) is set without "match"');

    await writeFile(
      configPath,
      JSON.stringify({
        providers: LOCAL_LLM,
        tools: { approval: { rules: [{ tool: "mcp_github_*", action: "allow" }] } },
      }),
    );
    const good = await cli(["config", "check"]);
    expect(good.code).toBe(0);
    expect(good.stdout).toContain("Configuration is valid.");
  });
});

describe("formatRuleTable", () => {
  it("is pure: one row per rule, times in the given zone", () => {
    const table = formatRuleTable(
      [
        {
          id: "a1b2c3d4",
          channel: "cli",
          chatId: "main",
          tool: "exec",
          program: "find",
          shape: ["-delete"],
          addedBy: "",
          addedAt: 0,
        },
        // Saved before shapes: read as the narrowest shape.
        {
          id: "e5f6a7b8",
          channel: "cli",
          chatId: "main",
          tool: "exec",
          program: "sed",
          addedBy: "ann",
          addedAt: 0,
        },
      ],
      "UTC",
    );
    expect(table.split("\n").slice(1)).toEqual([
      "a1b2c3d4  cli:main  exec  -         1970-01-01 00:00 (UTC)  `find` without -exec/-execdir/-ok/-okdir, -fprint, -fprint0, -fprintf, -fls; with -delete allowed",
      "e5f6a7b8  cli:main  exec  ann       1970-01-01 00:00 (UTC)  `sed` without -i, w/W, e",
    ]);
  });
});
