import { readFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { FileChatRules } from "../../src/approvals/chat-rules.js";
import {
  approvalRuleProblems,
  createApprovalPolicy,
  type ApprovalConfig,
  type PolicyOptions,
} from "../../src/approvals/policy.js";
import type { ApprovalRequest, ChatRule, ChatRuleStore } from "../../src/approvals/types.js";
import { ApprovalSchema } from "../../src/config/schema.js";
import { globToRegExp } from "../../src/util/glob.js";

const HOME = "/home/ann";
const WS = "/home/ann/.palaver/workspace";
const STATE = "/home/ann/.palaver";

/** The ChatRuleStore contract over an array (FileChatRules has its own tests). */
function memoryRules(rules: ChatRule[] = []): ChatRuleStore {
  return {
    list: () => [...rules],
    forChat: (channel, chatId) => rules.filter((r) => r.channel === channel && r.chatId === chatId),
    add: (rule) => {
      const added = { ...rule, id: `r${rules.length}`, addedAt: 0 };
      rules.push(added);
      return added;
    },
    revoke: () => false,
  };
}

function policy(config: unknown = {}, opts: Partial<PolicyOptions> = {}) {
  const parsed: ApprovalConfig = ApprovalSchema.parse(config);
  return createApprovalPolicy(parsed, {
    chatRules: memoryRules(),
    restrictToWorkspace: true,
    denyPatterns: [],
    stateDir: STATE,
    home: HOME,
    ...opts,
  });
}

function call(
  tool: string,
  args: Record<string, unknown>,
  more: Partial<ApprovalRequest> = {},
): ApprovalRequest {
  return { tool, args, channel: "telegram", chatId: "42", workspace: WS, readOnly: false, ...more };
}

const exec = (command: string, more: Record<string, unknown> = {}) => call("exec", { command, ...more });

describe("config rules (first layer)", () => {
  it("match a tool by exact name or glob, the first that matches deciding", () => {
    const p = policy({
      rules: [
        { tool: "mcp_github_get_*", action: "allow" },
        { tool: "mcp_github_*", action: "deny", reason: "no writes to GitHub" },
        { tool: "read_?ile", action: "ask", reason: "reads are asked here" },
      ],
    });
    expect(p.decide(call("mcp_github_get_issue", {}))).toEqual({
      action: "allow",
      reason: "rule 1 of tools.approval.rules",
      layer: "rule",
    });
    expect(p.decide(call("mcp_github_create_issue", {}))).toEqual({
      action: "deny",
      reason: "no writes to GitHub",
      layer: "rule",
    });
    // An "ask" from a rule offers no "always": the rule would still be checked first next time.
    expect(p.decide(call("read_file", { path: "x" }, { readOnly: true }))).toEqual({
      action: "ask",
      reason: "reads are asked here",
      layer: "rule",
    });
    expect(p.decide(call("mcp_gitlab_x", {})).layer).not.toBe("rule");
  });

  it("test `match` against the named argument, or against the arguments as JSON", () => {
    const p = policy({
      rules: [
        { tool: "exec", arg: "command", match: "^rm\\b", action: "deny", reason: "no rm" },
        { tool: "web_fetch", match: "evil\\.example", action: "ask", reason: "that site" },
        { tool: "write_file", arg: "path", match: "^notes/", action: "allow" },
      ],
    });
    expect(p.decide(exec("rm -rf build"))).toMatchObject({ action: "deny", reason: "no rm", layer: "rule" });
    // Anchored at the command's start: `echo rm` is not an rm.
    expect(p.decide(exec("echo rm")).layer).not.toBe("rule");
    expect(p.decide(call("web_fetch", { url: "https://evil.example/x" }))).toMatchObject({
      action: "ask",
      layer: "rule",
    });
    expect(p.decide(call("web_fetch", { url: "https://good.example/" })).layer).toBe("builtin");
    // An argument the call does not have never matches.
    expect(p.decide(call("write_file", { content: "notes/" })).layer).not.toBe("rule");
    expect(p.decide(call("write_file", { path: "notes/a.md", content: "" })).layer).toBe("rule");
  });

  it("match non-string arguments as JSON and case-insensitively", () => {
    const p = policy({
      rules: [
        { tool: "cron", arg: "every_seconds", match: "^[0-9]$", action: "deny", reason: "too often" },
        { tool: "exec", arg: "command", match: "shutdown", action: "deny" },
      ],
    });
    expect(p.decide(call("cron", { every_seconds: 5 })).action).toBe("deny");
    expect(p.decide(call("cron", { every_seconds: 50 })).layer).not.toBe("rule");
    expect(p.decide(exec("SHUTDOWN now")).layer).toBe("rule");
  });

  it("come before the destructive guard and the chat rules", () => {
    const rules = memoryRules([
      {
        id: "a",
        channel: "telegram",
        chatId: "42",
        tool: "exec",
        program: "touch",
        addedBy: "ann",
        addedAt: 0,
      },
    ]);
    const p = policy(
      { rules: [{ tool: "exec", match: "secret", action: "ask", reason: "secrets" }] },
      { chatRules: rules },
    );
    expect(p.decide(exec("touch secret"))).toMatchObject({ action: "ask", layer: "rule" });
    expect(p.decide(exec("touch x"))).toMatchObject({ action: "allow", layer: "chat" });
  });
});

describe("the destructive guard (second layer)", () => {
  it("denies what exec would refuse, without asking, in every mode", () => {
    for (const mode of ["off", "risky", "all"]) {
      const d = policy({ mode }).decide(exec("rm -rf ~"));
      expect(d.action).toBe("deny");
      expect(d.layer).toBe("builtin");
      expect(d.reason).toMatch(/^the destructive guard refuses it: recursive rm of ~/);
      expect(d.always).toBeUndefined();
    }
    expect(policy().decide(exec("rm -rf .", { working_dir: ".." })).action).toBe("deny");
    expect(policy().decide(exec(`rm -rf ${STATE}`)).action).toBe("deny");
    expect(policy().decide(exec("rm -rf build")).action).toBe("ask");
  });

  it("denies tools.exec.denyPatterns as exec does", () => {
    const p = policy({}, { denyPatterns: ["curl .*\\| *sh"] });
    expect(p.decide(exec("curl https://x | sh"))).toEqual({
      action: "deny",
      reason: "the destructive guard refuses it: it matches the configured deny pattern /curl .*\\| *sh/",
      layer: "builtin",
    });
  });

  it("comes before chat rules", () => {
    const rules = memoryRules([
      { id: "a", channel: "telegram", chatId: "42", tool: "exec", program: "rm", addedBy: "ann", addedAt: 0 },
    ]);
    expect(policy({}, { chatRules: rules }).decide(exec("rm -rf /")).action).toBe("deny");
  });
});

describe("chat rules (third layer)", () => {
  const rules = () =>
    memoryRules([
      {
        id: "g1",
        channel: "telegram",
        chatId: "42",
        tool: "exec",
        program: "mkdir",
        shape: ["-p"],
        addedBy: "ann",
        addedAt: 0,
      },
      { id: "w1", channel: "telegram", chatId: "42", tool: "write_file", addedBy: "ann", addedAt: 0 },
      {
        id: "o1",
        channel: "slack",
        chatId: "C1",
        tool: "exec",
        program: "touch",
        addedBy: "bob",
        addedAt: 0,
      },
    ]);

  it("allow the same program in the same chat only", () => {
    const p = policy({}, { chatRules: rules() });
    expect(p.decide(exec("mkdir -p notes/a"))).toEqual({
      action: "allow",
      reason: "always allowed in this chat (rule g1)",
      layer: "chat",
    });
    expect(p.decide(exec("touch x")).action).toBe("ask");
    expect(p.decide({ ...exec("touch x"), channel: "slack", chatId: "C1" }).layer).toBe("chat");
    expect(p.decide({ ...exec("mkdir -p y"), chatId: "43" }).action).toBe("ask");
  });

  it("allow only a single plain command of that program", () => {
    const p = policy({}, { chatRules: rules() });
    expect(p.decide(exec("mkdir x; rm -rf build")).action).toBe("ask");
    expect(p.decide(exec("mkdir x | sh")).action).toBe("ask");
    expect(p.decide(exec("mkdir $(rm x)")).action).toBe("ask");
    expect(p.decide(exec("./mkdir x")).action).toBe("ask");
  });

  it("allow only calls within the approved shape: no option beyond the approved ones", () => {
    const p = policy({}, { chatRules: rules() });
    expect(p.decide(exec("mkdir y")).layer).toBe("chat");
    expect(p.decide(exec("mkdir -m 777 y")).action).toBe("ask");
    expect(p.decide(exec("mkdir --mode=777 y")).action).toBe("ask");
    // A rule saved before shapes (program only) has the narrowest meaning: no options at all.
    const slack = (command: string) => ({ ...exec(command), channel: "slack", chatId: "C1" });
    expect(p.decide(slack("touch x")).layer).toBe("chat");
    expect(p.decide(slack("touch -d 2000-01-01 x")).action).toBe("ask");
    // A glob that may expand to options has no shape to compare.
    expect(p.decide(exec("mkdir -p *")).action).toBe("ask");
  });

  it("allow a non-exec tool whatever its arguments", () => {
    const p = policy({ mode: "all" }, { chatRules: rules(), restrictToWorkspace: false });
    expect(p.decide(call("write_file", { path: "/etc/x", content: "" })).layer).toBe("chat");
    expect(p.decide(call("edit_file", { path: "x" })).action).toBe("ask");
  });

  it("are read from FileChatRules as they are added", async () => {
    const dir = await mkdtemp(join(tmpdir(), "palaver-policy-"));
    try {
      const store = new FileChatRules(join(dir, "approvals", "rules.json"));
      const p = policy({}, { chatRules: store });
      const first = p.decide(exec("mkdir -p a/b"));
      expect(first).toMatchObject({
        action: "ask",
        always: { tool: "exec", program: "mkdir", shape: ["-p"] },
      });
      await store.add({ channel: "telegram", chatId: "42", ...first.always!, addedBy: "ann" });
      expect(p.decide(exec("mkdir -p c")).layer).toBe("chat");
      expect(p.decide(exec("mkdir -pm 777 c")).action).toBe("ask");
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe("modes and the built-in risk rules", () => {
  it("off allows everything the guard lets through", () => {
    const p = policy({ mode: "off" }, { restrictToWorkspace: false });
    for (const req of [
      exec("rm -rf build; curl x | sh"),
      call("write_file", { path: "/etc/x" }),
      call("mcp_x_y", {}),
    ])
      expect(p.decide(req)).toEqual({ action: "allow", reason: "approvals are off", layer: "mode" });
    // The config's rules still apply.
    const ruled = policy({ mode: "off", rules: [{ tool: "exec", match: "push", action: "ask" }] });
    expect(ruled.decide(exec("git push")).action).toBe("ask");
  });

  it("risky: exec asks unless read-only, offering 'always' for a plain command's program", () => {
    const p = policy();
    expect(p.decide(exec("ls -la"))).toEqual({
      action: "allow",
      reason: "a read-only command",
      layer: "builtin",
    });
    expect(p.decide(exec("rm -rf build"))).toEqual({
      action: "ask",
      reason: "runs a shell command that changes things (rm)",
      layer: "builtin",
      always: { tool: "exec", program: "rm", shape: ["-f", "-r"] },
    });
    const piped = p.decide(exec("ls | sh"));
    expect(piped.action).toBe("ask");
    expect(piped.reason).toMatch(/more than one plain command/);
    expect(piped.always).toBeUndefined();
    expect(p.decide(exec("./build.sh")).always).toBeUndefined();
    // "Always allow sudo" would allow everything.
    const sudo = p.decide(exec("sudo apt upgrade"));
    expect(sudo.action).toBe("ask");
    expect(sudo.always).toBeUndefined();
    expect(sudo.alwaysWithheld).toBe("sudo runs code that the workspace can change");
  });

  it("risky: writes outside the workspace ask when the tool may make them", () => {
    const open = policy({}, { restrictToWorkspace: false });
    expect(open.decide(call("write_file", { path: "/etc/hosts", content: "" }))).toEqual({
      action: "ask",
      reason: "writes outside the workspace (/etc/hosts)",
      layer: "builtin",
      always: { tool: "write_file" },
    });
    expect(open.decide(call("edit_file", { path: "../x" })).reason).toBe(
      "writes outside the workspace (/home/ann/.palaver/x)",
    );
    expect(open.decide(call("edit_file", { path: "~/x" })).action).toBe("ask");
    expect(open.decide(call("write_file", { path: "notes/a.md" })).action).toBe("allow");
    expect(open.decide(call("write_file", { path: `${WS}/a.md` })).action).toBe("allow");
    // Restricted: the tool refuses it with its own message.
    expect(policy().decide(call("write_file", { path: "/etc/hosts" })).action).toBe("allow");
  });

  it("risky: web_fetch, MCP tools and the rest are allowed", () => {
    const p = policy();
    expect(p.decide(call("web_fetch", { url: "https://x" }))).toMatchObject({
      action: "allow",
      layer: "builtin",
    });
    expect(p.decide(call("mcp_github_create_issue", {}))).toMatchObject({
      action: "allow",
      layer: "builtin",
    });
    expect(p.decide(call("message", { content: "hi" }))).toMatchObject({ action: "allow", layer: "mode" });
  });

  it("all: everything asks except read-only tools and read-only commands", () => {
    const p = policy({ mode: "all" });
    expect(p.decide(call("message", { content: "hi" }))).toEqual({
      action: "ask",
      reason: "every tool call is asked (tools.approval.mode all)",
      layer: "mode",
      always: { tool: "message" },
    });
    // web_fetch declares itself read-only, as the tool does; MCP tools never do.
    expect(p.decide(call("web_fetch", { url: "https://x" }, { readOnly: true })).action).toBe("allow");
    expect(p.decide(call("web_fetch", { url: "https://x" })).action).toBe("ask");
    expect(p.decide(call("mcp_a_b", {})).action).toBe("ask");
    expect(p.decide(call("write_file", { path: "a" })).action).toBe("ask");
    expect(p.decide(call("read_file", { path: "a" }, { readOnly: true }))).toMatchObject({
      action: "allow",
      layer: "mode",
    });
    expect(p.decide(exec("ls -la")).action).toBe("allow");
    expect(p.decide(exec("git push")).action).toBe("ask");
  });
});

describe("globToRegExp", () => {
  it("anchors and escapes", () => {
    expect(globToRegExp("mcp_*").test("mcp_github_x")).toBe(true);
    expect(globToRegExp("mcp_*").test("xmcp_")).toBe(false);
    expect(globToRegExp("a.b").test("axb")).toBe(false);
    expect(globToRegExp("exec").test("exec2")).toBe(false);
  });
});

describe("approvalRuleProblems", () => {
  it("reports `arg` without `match`", () => {
    const config = ApprovalSchema.parse({
      rules: [
        { tool: "exec", arg: "command", match: "rm", action: "deny" },
        { tool: "exec", arg: "command", action: "deny" },
        { tool: "nothing_like_this_*", action: "allow" },
      ],
    });
    const problem =
      'tools.approval.rules[1]: "arg" (command) is set without "match"; add the regular expression to test it with, or remove "arg"';
    expect(approvalRuleProblems(config)).toEqual([problem]);
    // Such a rule would allow every exec: the gateway refuses to start instead (exit 78).
    expect(() =>
      createApprovalPolicy(config, { chatRules: memoryRules(), restrictToWorkspace: true, denyPatterns: [] }),
    ).toThrow(expect.objectContaining({ name: "ConfigError", problems: [problem] }));
  });
});

describe("the README's example rules", () => {
  it("do what the README says", () => {
    const readme = readFileSync(join(import.meta.dirname, "..", "..", "README.md"), "utf8");
    const section = readme.slice(readme.indexOf("## Approvals"));
    const block = /```json\n([\s\S]*?)```/.exec(section)![1]!;
    const { tools } = JSON.parse(block) as { tools: { approval: unknown } };
    const p = policy(tools.approval);
    expect(p.decide(exec("rm -rf build"))).toMatchObject({ action: "deny", layer: "rule" });
    expect(p.decide(exec("  rm x"))).toMatchObject({ action: "deny", layer: "rule" });
    expect(p.decide(exec("git rm x")).layer).not.toBe("rule");
    expect(p.decide(call("mcp_github_get_issue", {}))).toMatchObject({ action: "allow", layer: "rule" });
    expect(p.decide(call("mcp_github_list_repos", {}))).toMatchObject({ action: "allow", layer: "rule" });
    expect(p.decide(call("mcp_github_create_issue", {}))).toMatchObject({ action: "ask", layer: "rule" });
    for (const url of ["https://example.com", "http://www.example.com/a", "https://EXAMPLE.com/"])
      expect(p.decide(call("web_fetch", { url }))).toMatchObject({ action: "ask", layer: "rule" });
    for (const url of ["https://example.com.evil.org/", "https://notexample.com/"])
      expect(p.decide(call("web_fetch", { url })).layer).toBe("builtin");
  });
});

describe("always allow remembers the risk shape (issue 33)", () => {
  /** Approves `first` with Always through a real FileChatRules, then decides `later`. */
  async function afterAlways(
    first: string,
    later: string,
  ): Promise<ReturnType<ReturnType<typeof policy>["decide"]>> {
    const dir = await mkdtemp(join(tmpdir(), "palaver-policy-"));
    try {
      const store = new FileChatRules(join(dir, "approvals", "rules.json"));
      const p = policy({}, { chatRules: store });
      const asked = p.decide(exec(first));
      expect(asked.action).toBe("ask");
      if (asked.always)
        await store.add({ channel: "telegram", chatId: "42", ...asked.always, addedBy: "ann" });
      // The approved call itself is covered (when Always was offered at all).
      if (asked.always) expect(p.decide(exec(first)).layer).toBe("chat");
      return p.decide(exec(later));
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  }

  it.each([
    ["find . -name AGENTS.md -exec cat {} +", "find . -maxdepth 0 -exec touch X {} +"],
    ["find . -name AGENTS.md -delete", "find . -maxdepth 0 -exec touch X {} +"],
    ["find . -name AGENTS.md -delete", "find . -fprint out"],
    ["find . -fprint out", "find notes -name x -delete"],
    ["sed -n 1p notes.md", "sed -n '1e touch X' notes.md"],
    ["sed -n 1p notes.md", "sed -n 's/a/touch X/e' notes.md"],
    ["sed -n 1p notes.md", "sed -i s/a/b/ notes.md"],
    ["sed -n 1p notes.md", "sed -n --in-pl s/a/b/ notes.md"],
    ["sed -n 1p notes.md", "sed -n '1w out' notes.md"],
    ["sed -n 1p notes.md", "sed -n -f script.sed notes.md"],
    ["sed -i s/a/b/ notes.md", "sed -n --expr='1e touch X' notes.md"],
    ["rm notes.md", "rm -rf notes"],
    ["cp a b", "cp --no-target-directory a b"],
  ])("after Always on %j, %j asks", async (first, later) => {
    const d = await afterAlways(first, later);
    expect(d).toMatchObject({ action: "ask", layer: "builtin" });
  });

  it.each([
    ["find . -name a -delete", "find . -type f -name b -delete"],
    ["sed -i s/a/b/ notes.md", "sed -n 2p notes.md"],
    ["sed -i s/a/b/ notes.md", "sed --in-place=.bak -e 's/x/y/' other.md"],
    ["rm -rf build", "rm -r dist"],
  ])("after Always on %j, the narrower %j runs", async (first, later) => {
    expect((await afterAlways(first, later)).layer).toBe("chat");
  });

  // Programs that run code by design: the exact line would not mean the same call later (the
  // script, package.json, the Makefile or .git/config can change), so Always is not offered.
  it.each([
    "python3 x.py",
    "python -c 1",
    "node x.js",
    "perl -e 1",
    "ruby x.rb",
    "awk 1 notes.md",
    "gawk 1 x",
    "php x.php",
    "lua x.lua",
    "npm test",
    "npx vitest",
    "pnpm build",
    "yarn test",
    "pip install x",
    "make",
    "cargo test",
    "go test ./...",
    "git status",
    "git -c core.pager=sh log",
    "sh x.sh",
    "bash -c ls",
    "vim x",
    "vi x",
    "nano x",
    "emacs x",
    "less x",
    "more x",
    "tar --to-command=sh -xf a.tar",
    "rsync -e sh a b",
    "ssh host",
    "scp a host:b",
    "xargs rm",
    "env X=1 rm x",
    "sudo ls",
    "find . -exec cat {} +",
    "find . -okdir ls ;",
    "sed -n 1e notes.md",
    "sed -f s.sed x",
  ])("%j: Always is not offered, and no rule for its program covers it", (command) => {
    const program = command.split(" ")[0]!;
    const rules = memoryRules([
      { id: "old", channel: "telegram", chatId: "42", tool: "exec", program, addedBy: "ann", addedAt: 0 },
      {
        id: "new",
        channel: "telegram",
        chatId: "42",
        tool: "exec",
        program,
        shape: ["-c", "-e", "-x", "-f"],
        addedBy: "ann",
        addedAt: 0,
      },
    ]);
    const d = policy({}, { chatRules: rules }).decide(exec(command));
    expect(d.action).toBe("ask");
    expect(d.always).toBeUndefined();
    expect(d.alwaysWithheld).toMatch(/\S/);
  });
});
