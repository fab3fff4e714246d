import { mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { FileChatRules } from "../../src/approvals/chat-rules.js";
import { createApprovalPolicy } from "../../src/approvals/policy.js";
import { ApprovalSchema } from "../../src/config/schema.js";
import { captureLog } from "../helpers/log.js";

let dir: string;
let path: string;

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), "palaver-chat-rules-"));
  path = join(dir, "state", "approvals", "rules.json");
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

const gitRule = { channel: "telegram", chatId: "42", tool: "exec", program: "git", addedBy: "ann (7)" };

describe("FileChatRules", () => {
  it("starts empty without a file and creates it 0600 in a 0700 folder on the first add", async () => {
    const store = new FileChatRules(path);
    expect(store.list()).toEqual([]);
    const added = await store.add(gitRule);
    expect(added.id).toMatch(/^[0-9a-f]{8}$/);
    expect(added.addedAt).toBeGreaterThan(0);
    expect(statSync(path).mode & 0o777).toBe(0o600);
    expect(statSync(join(dir, "state", "approvals")).mode & 0o777).toBe(0o700);
    expect(JSON.parse(readFileSync(path, "utf8"))).toEqual({ version: 1, rules: [added] });
    // No temp files left beside it.
    expect(readdirSync(join(dir, "state", "approvals"))).toEqual(["rules.json"]);
  });

  it("keeps rules across instances, per chat, and revokes by id", async () => {
    const a = new FileChatRules(path);
    const git = await a.add(gitRule);
    const write = await a.add({ channel: "slack", chatId: "C1", tool: "write_file", addedBy: "bob" });
    expect(write).not.toHaveProperty("program");
    const b = new FileChatRules(path);
    expect(b.list()).toEqual([git, write]);
    expect(b.forChat("telegram", "42")).toEqual([git]);
    expect(b.forChat("telegram", "43")).toEqual([]);
    expect(await b.revoke("nope")).toBe(false);
    expect(await b.revoke(git.id)).toBe(true);
    expect(b.list()).toEqual([write]);
    expect(new FileChatRules(path).list()).toEqual([write]);
  });

  it("sees another process's changes at its next read (no restart)", async () => {
    const gateway = new FileChatRules(path);
    const rule = await gateway.add(gitRule);
    expect(gateway.forChat("telegram", "42")).toHaveLength(1);
    // `palaver approvals revoke` in another process: another instance on the same file.
    const cli = new FileChatRules(path);
    expect(await cli.revoke(rule.id)).toBe(true);
    expect(gateway.forChat("telegram", "42")).toEqual([]);
    // And an edit by hand, written in place.
    const handAdded = { ...rule, id: "abcd1234" };
    writeFileSync(path, JSON.stringify({ version: 1, rules: [handAdded] }));
    expect(gateway.list()).toEqual([handAdded]);
  });

  it("moves a corrupt file aside with a warning and starts empty", async () => {
    const { log, lines } = captureLog();
    mkdirSync(join(dir, "state", "approvals"), { recursive: true });
    writeFileSync(path, "{ not json");
    const store = new FileChatRules(path, log);
    expect(store.list()).toEqual([]);
    const files = readdirSync(join(dir, "state", "approvals"));
    const aside = files.find((f) => /^rules\.json\.corrupt-\d+$/.test(f));
    expect(aside).toBeDefined();
    expect(readFileSync(join(dir, "state", "approvals", aside!), "utf8")).toBe("{ not json");
    expect(lines.some((l) => l.level === 40 && /moved it aside/.test(l.msg ?? ""))).toBe(true);
    // The store still works and writes a good file.
    await store.add(gitRule);
    expect(new FileChatRules(path).list()).toHaveLength(1);
  });

  it("treats a file of the wrong shape as corrupt", async () => {
    const { log, lines } = captureLog();
    mkdirSync(join(dir, "state", "approvals"), { recursive: true });
    writeFileSync(path, JSON.stringify({ version: 2, rules: [{ id: 1 }] }));
    expect(new FileChatRules(path, log).list()).toEqual([]);
    expect(lines[0]).toMatchObject({ level: 40, path });
    expect(String(lines[0]!.problem)).toMatch(/version/);
  });

  it("keeps the rules it has when the file cannot be read, and refuses to write over it", async () => {
    const { log, lines } = captureLog();
    const store = new FileChatRules(path, log);
    const rule = await store.add(gitRule);
    // Something that is not a readable file where the rules should be (root reads any file mode).
    rmSync(path);
    mkdirSync(path);
    expect(store.list()).toEqual([rule]);
    expect(store.forChat("telegram", "42")).toEqual([rule]);
    expect(lines.filter((l) => l.msg === "cannot read the approval rules file")).toHaveLength(1);
    await expect(store.add(gitRule)).rejects.toThrow(/EISDIR/);
    expect(statSync(path).isDirectory()).toBe(true);
  });

  it("keeps a rule's shape, and loads rules saved before shapes with the narrowest meaning", async () => {
    mkdirSync(join(dir, "state", "approvals"), { recursive: true });
    // As an older palaver wrote them after "Always" on `find ... -exec cat {} +` and `sed -n 1p`.
    const old = [
      {
        id: "f0f0f0f0",
        channel: "telegram",
        chatId: "42",
        tool: "exec",
        program: "find",
        addedBy: "ann",
        addedAt: 1,
      },
      {
        id: "5ed5ed5e",
        channel: "telegram",
        chatId: "42",
        tool: "exec",
        program: "sed",
        addedBy: "ann",
        addedAt: 2,
      },
      {
        id: "61761761",
        channel: "telegram",
        chatId: "42",
        tool: "exec",
        program: "git",
        addedBy: "ann",
        addedAt: 3,
      },
    ];
    writeFileSync(path, JSON.stringify({ version: 1, rules: old }));
    const store = new FileChatRules(path);
    expect(store.list()).toEqual(old);
    const shaped = await store.add({ ...gitRule, program: "rm", shape: ["-r"] });
    expect(new FileChatRules(path).list()).toEqual([...old, shaped]);
    expect(shaped.shape).toEqual(["-r"]);

    const policy = createApprovalPolicy(ApprovalSchema.parse({}), {
      chatRules: new FileChatRules(path),
      restrictToWorkspace: true,
      denyPatterns: [],
      stateDir: join(dir, "state"),
      home: join(dir, "home"),
    });
    const decide = (command: string) =>
      policy.decide({
        tool: "exec",
        args: { command },
        channel: "telegram",
        chatId: "42",
        workspace: join(dir, "ws"),
        readOnly: false,
      });
    expect(decide("find . -name AGENTS.md -printf x").layer).toBe("chat");
    expect(decide("find . -maxdepth 0 -exec touch X {} +").action).toBe("ask");
    expect(decide("find . -name x -fprint out").action).toBe("ask");
    expect(decide("sed -n 2p notes.md").layer).toBe("chat");
    expect(decide("sed -n '1e touch X' notes.md").action).toBe("ask");
    expect(decide("sed -i s/a/b/ notes.md").action).toBe("ask");
    // An old rule for a program that runs code matches nothing now.
    expect(decide("git status").action).toBe("ask");
    expect(decide("rm -r old").layer).toBe("chat");
    expect(decide("rm -rf old").action).toBe("ask");
  });
});
