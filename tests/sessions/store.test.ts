import { spawnSync } from "node:child_process";
import {
  copyFile,
  mkdir,
  mkdtemp,
  readFile,
  readdir,
  rename,
  rm,
  stat,
  unlink,
  utimes,
  writeFile,
} from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { ChatMessage } from "../../src/llm/types.js";
import { SessionStore, formatTimestamp, parseTimestamp, safeKey } from "../../src/sessions/store.js";
import { captureLog } from "../helpers/log.js";
import { haveCommand, requireOrSkip } from "../helpers/requires.js";
import { waitFor } from "../helpers/wait.js";

const FIXTURE = join(
  dirname(fileURLToPath(import.meta.url)),
  "..",
  "fixtures",
  "nanobot",
  "sessions",
  "telegram_12345.jsonl",
);
const NANOBOT_METADATA_KEYS = ["_type", "key", "created_at", "updated_at", "metadata", "last_consolidated"];
const PY_ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}$/;

const lines = async (path: string): Promise<string[]> =>
  (await readFile(path, "utf8")).split("\n").filter((l) => l !== "");

let dir: string;
let sessionsDir: string;

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), "palaver-sessions-"));
  sessionsDir = join(dir, "sessions");
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe("file names and timestamps", () => {
  it("makes nanobot's file names", () => {
    expect(safeKey("telegram:12345")).toBe("telegram_12345");
    expect(safeKey("slack:C0123:1700000000.000100")).toBe("slack_C0123_1700000000.000100");
    expect(safeKey(' a<b>c"d/e\\f|g?h*i ')).toBe("a_b_c_d_e_f_g_h_i");
    const store = new SessionStore(sessionsDir);
    expect(store.pathFor("discord:42")).toBe(join(sessionsDir, "discord_42.jsonl"));
  });

  it("writes Python's isoformat and reads both it and ISO with a zone", () => {
    const d = new Date(2025, 1, 1, 10, 0, 0, 123);
    expect(formatTimestamp(d)).toBe("2025-02-01T10:00:00.123000");
    expect(parseTimestamp("2025-02-01T10:00:00.123456")!.getTime()).toBe(d.getTime());
    expect(parseTimestamp("2025-02-01T10:00:00")!.getTime()).toBe(new Date(2025, 1, 1, 10).getTime());
    expect(parseTimestamp("2025-02-01T10:00:00.123Z")!.toISOString()).toBe("2025-02-01T10:00:00.123Z");
    expect(parseTimestamp("2025-02-01T10:00:00+02:00")!.toISOString()).toBe("2025-02-01T08:00:00.000Z");
    expect(parseTimestamp("yesterday")).toBeUndefined();
    expect(parseTimestamp(42)).toBeUndefined();
  });
});

describe("SessionStore", () => {
  it("round-trips messages, metadata and consolidation", async () => {
    const store = new SessionStore(sessionsDir);
    const s = await store.get("telegram:1");
    expect(s.messages).toEqual([]);
    const messages: ChatMessage[] = [
      { role: "user", content: "héllo ✓ \u2028 line\nbreak" },
      {
        role: "assistant",
        content: null,
        tool_calls: [
          { id: "c1", type: "function", function: { name: "list_dir", arguments: '{"path":"."}' } },
        ],
      },
      { role: "tool", tool_call_id: "c1", name: "list_dir", content: "a.txt" },
      {
        role: "assistant",
        content: "one file",
        tools_used: ["list_dir"],
        timestamp: "2025-03-01T12:00:00.000000",
      },
    ];
    await store.append(s, messages);
    expect(s.messages).toHaveLength(4);
    expect(s.messages[0]!.timestamp).toMatch(PY_ISO);
    expect(s.messages[3]!.timestamp).toBe("2025-03-01T12:00:00.000000"); // kept when present
    s.metadata = { title: "test" };
    s.lastConsolidated = 2;
    await store.saveMetadata(s);

    const again = await new SessionStore(sessionsDir).get("telegram:1");
    expect(again).not.toBe(s);
    expect(again.key).toBe("telegram:1");
    expect(again.messages).toEqual(s.messages);
    expect(again.metadata).toEqual({ title: "test" });
    expect(again.lastConsolidated).toBe(2);
    expect(Math.abs(again.createdAt.getTime() - s.createdAt.getTime())).toBeLessThan(1);
  });

  it("reads a nanobot session file unchanged", async () => {
    await mkdir(sessionsDir, { recursive: true });
    const path = join(sessionsDir, "telegram_12345.jsonl");
    await copyFile(FIXTURE, path);
    const before = await readFile(path);
    const { log, lines: records } = captureLog();

    const s = await new SessionStore(sessionsDir, log).get("telegram:12345");
    expect(records.filter((r) => r.level === 40)).toEqual([]); // no warnings
    expect(s.messages).toHaveLength(9);
    expect(s.messages.map((m) => m.role)).toEqual([
      "user",
      "assistant",
      "tool",
      "assistant",
      "user",
      "assistant",
      "tool",
      "tool",
      "assistant",
    ]);
    expect(s.messages[0]!.content).toBe("Salut ! Quel temps fait-il à Paris ?");
    expect(s.messages[1]!.content).toBeNull();
    expect(s.messages[1]!.tool_calls![0]!.function).toEqual({
      name: "web_fetch",
      arguments: '{"url": "https://wttr.in/Paris?format=3"}',
    });
    expect(s.messages[1]!.reasoning_content).toBe("The user wants the weather; fetch wttr.in.");
    expect(s.messages[2]).toMatchObject({ role: "tool", tool_call_id: "call_abc123", name: "web_fetch" });
    expect(s.messages[8]!.tools_used).toEqual(["edit_file", "read_file"]);
    // The second metadata line wins.
    expect(s.lastConsolidated).toBe(4);
    expect(s.metadata).toEqual({ title: "Météo" });
    expect(s.createdAt.getTime()).toBe(new Date(2025, 1, 1, 10, 0, 0, 123).getTime());
    expect(s.updatedAt.getTime()).toBe(new Date(2025, 1, 1, 10, 6, 0, 0).getTime());

    const h = s.history(100);
    expect(h.map((m) => m.role)).toEqual(["user", "assistant", "tool", "tool", "assistant"]);
    expect(h[0]!.content).toBe("Remember that I prefer Celsius.");
    expect(h.every((m) => !("timestamp" in m) && !("tools_used" in m))).toBe(true);

    // Loading never touches the file.
    expect((await readFile(path)).equals(before)).toBe(true);
  });

  it("appends to a nanobot file without rewriting it", async () => {
    await mkdir(sessionsDir, { recursive: true });
    const path = join(sessionsDir, "telegram_12345.jsonl");
    await copyFile(FIXTURE, path);
    const before = await readFile(path);
    const { ino } = await stat(path);

    const store = new SessionStore(sessionsDir);
    const s = await store.get("telegram:12345");
    await store.append(s, [
      { role: "user", content: "and tomorrow?" },
      { role: "assistant", content: "Sunny." },
    ]);
    const after = await readFile(path);
    const st = await stat(path);
    expect(st.ino).toBe(ino);
    expect(after.length).toBeGreaterThan(before.length);
    expect(after.subarray(0, before.length).equals(before)).toBe(true);
    const added = after.subarray(before.length).toString("utf8").split("\n").filter(Boolean);
    expect(added.map((l) => (JSON.parse(l) as ChatMessage).content)).toEqual(["and tomorrow?", "Sunny."]);

    const reloaded = await new SessionStore(sessionsDir).get("telegram:12345");
    expect(reloaded.messages).toHaveLength(11);
    expect(reloaded.lastConsolidated).toBe(4);
  });

  it("writes files nanobot can read: JSON lines, nanobot's metadata keys first", async () => {
    const store = new SessionStore(sessionsDir);
    const s = await store.get("cli:direct");
    await store.append(s, [
      { role: "user", content: "ça va ? 日本語" },
      { role: "assistant", content: "oui" },
    ]);
    const path = store.pathFor("cli:direct");
    expect(path).toBe(join(sessionsDir, "cli_direct.jsonl"));
    const raw = await readFile(path, "utf8");
    expect(raw).toContain("ça va ? 日本語"); // plain UTF-8, like ensure_ascii=False
    expect(raw.endsWith("\n")).toBe(true);
    const parsed = raw
      .split("\n")
      .filter(Boolean)
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(Object.keys(parsed[0]!)).toEqual(NANOBOT_METADATA_KEYS);
    expect(parsed[0]).toMatchObject({
      _type: "metadata",
      key: "cli:direct",
      metadata: {},
      last_consolidated: 0,
    });
    expect(parsed[0]!.created_at).toMatch(PY_ISO);
    expect(parsed[0]!.updated_at).toMatch(PY_ISO);
    expect(parsed.slice(1).map((m) => m.role)).toEqual(["user", "assistant"]);
    expect(parsed[1]!.timestamp).toMatch(PY_ISO);
  });

  const noPython = requireOrSkip(
    haveCommand("python3") ? "" : "nanobot's loader check needs python3 (apt-get install python3)",
  );
  it.skipIf(noPython)("is read by nanobot's own loading rules (python3)", async () => {
    const store = new SessionStore(sessionsDir);
    const s = await store.get("telegram:777");
    await store.append(s, [
      { role: "user", content: "hé" },
      { role: "assistant", content: "ok" },
    ]);
    s.lastConsolidated = 1;
    await store.saveMetadata(s);
    // nanobot's SessionManager._load, reduced to its parsing.
    const script = `
import json, sys
from datetime import datetime
messages, meta, lc, created = [], {}, 0, None
with open(sys.argv[1], encoding="utf-8") as f:
    for line in f:
        line = line.strip()
        if not line:
            continue
        data = json.loads(line)
        if data.get("_type") == "metadata":
            meta = data.get("metadata", {})
            created = datetime.fromisoformat(data["created_at"]) if data.get("created_at") else None
            datetime.fromisoformat(data["updated_at"])
            lc = data.get("last_consolidated", 0)
        else:
            messages.append(data)
print(json.dumps({"n": len(messages), "lc": lc, "first": messages[0]["content"], "naive": created.tzinfo is None}))
`;
    const out = spawnSync("python3", ["-c", script, store.pathFor("telegram:777")], { encoding: "utf8" });
    expect(out.stderr).toBe("");
    expect(JSON.parse(out.stdout)).toEqual({ n: 2, lc: 1, first: "hé", naive: true });
  });

  it("skips a corrupt or truncated line with one warning naming file and line, and keeps the rest", async () => {
    await mkdir(sessionsDir, { recursive: true });
    const path = join(sessionsDir, "t_1.jsonl");
    const meta = JSON.stringify({
      _type: "metadata",
      key: "t:1",
      created_at: "",
      metadata: {},
      last_consolidated: 0,
    });
    await writeFile(
      path,
      [
        meta,
        JSON.stringify({ role: "user", content: "one" }),
        '{"role": "assistant", "content": "tru', // cut mid-line
        "[1, 2]",
        JSON.stringify({ role: "robot", content: "?" }),
        "",
        JSON.stringify({ role: "assistant", content: "two" }),
        '{"role": "user", "content": "cut at the e', // last line, no newline: a crash mid-write
      ].join("\n"),
    );
    const { log, lines: records } = captureLog();
    const store = new SessionStore(sessionsDir, log);
    const s = await store.get("t:1");
    expect(s.messages.map((m) => m.content)).toEqual(["one", "two"]);
    const warnings = records.filter((r) => r.level === 40 && r.line !== undefined);
    expect(warnings.map((w) => w.line)).toEqual([3, 4, 5, 8]);
    expect(warnings.every((w) => w.file === path)).toBe(true);

    // The next append starts on a fresh line, so the cut line does not swallow it.
    await store.append(s, [{ role: "user", content: "three" }]);
    const again = await new SessionStore(sessionsDir, captureLog().log).get("t:1");
    expect(again.messages.map((m) => m.content)).toEqual(["one", "two", "three"]);
  });

  it("reads a file of many decoding chunks whole: long lines, non-ASCII text, bad lines numbered right", async () => {
    await mkdir(sessionsDir, { recursive: true });
    const path = join(sessionsDir, "t_2.jsonl");
    // ~600 KB: lines of every length around the 64 KB decoding chunk, one far longer than a chunk,
    // multi-byte characters everywhere (a chunk must never cut one), and bad lines on both sides.
    const contents = Array.from({ length: 400 }, (_, i) =>
      i === 150 ? "€".repeat(100_000) : `${i} ✓ ${"ä".repeat((i * 37) % 3000)}`,
    );
    const rawLines = [JSON.stringify({ _type: "metadata", key: "t:2", last_consolidated: 0 })];
    const badLineNumbers: number[] = [];
    contents.forEach((content, i) => {
      if (i % 97 === 5) {
        rawLines.push(`{"role": "user", "content": "cut ${i}`);
        badLineNumbers.push(rawLines.length);
      }
      rawLines.push(JSON.stringify({ role: i % 2 ? "assistant" : "user", content }));
    });
    await writeFile(path, rawLines.join("\n") + "\n");
    const { log, lines: records } = captureLog();
    const s = await new SessionStore(sessionsDir, log).get("t:2");
    expect(s.messages.map((m) => m.content)).toEqual(contents);
    const warnings = records.filter((r) => r.level === 40 && r.line !== undefined);
    expect(warnings.map((w) => w.line)).toEqual(badLineNumbers);
  });

  it("validates metadata lines too; every bad line is kept once, raw, in <file>.corrupt (0600)", async () => {
    await mkdir(sessionsDir, { recursive: true });
    const path = join(sessionsDir, "t_2.jsonl");
    const good = JSON.stringify({
      _type: "metadata",
      key: "t:2",
      metadata: { lang: "fr" },
      last_consolidated: 1,
    });
    const bad = [
      JSON.stringify({ _type: "metadata", key: "t:2", metadata: "oops", last_consolidated: -5 }),
      JSON.stringify({ role: "user", content: "fine", tool_calls: [{ id: 3 }] }),
      '{"role": "assistant", "content": "cut',
      JSON.stringify({ t: "in", id: "x", at: 1 }),
    ];
    const text = [
      good,
      JSON.stringify({ role: "user", content: "a" }),
      ...bad,
      JSON.stringify({ role: "user", content: "b" }),
    ];
    await writeFile(path, text.join("\n") + "\n");
    const { log, lines: records } = captureLog();
    const s = await new SessionStore(sessionsDir, log).get("t:2");
    // The broken metadata line did not undo the good one before it.
    expect(s.metadata).toEqual({ lang: "fr" });
    expect(s.lastConsolidated).toBe(1);
    expect(s.messages.map((m) => m.content)).toEqual(["a", "b"]);
    const corrupt = `${path}.corrupt`;
    expect(await lines(corrupt)).toEqual(bad);
    expect((await stat(corrupt)).mode & 0o777).toBe(0o600);
    const summary = records.find((r) => r.level === 40 && r.keptIn === corrupt);
    expect(summary).toMatchObject({ skipped: 4 });
    // Sessions are never rewritten to drop them, so a second load must not add them again.
    await new SessionStore(sessionsDir, captureLog().log).get("t:2");
    expect(await lines(corrupt)).toEqual(bad);
  });

  it("creates session files 0600 and the sessions folder 0700 (conversations are private)", async () => {
    const store = new SessionStore(sessionsDir, captureLog().log);
    const s = await store.get("t:3");
    await store.append(s, [{ role: "user", content: "secret plans" }]);
    const mode = async (p: string) => (await stat(p)).mode & 0o777;
    expect(await mode(sessionsDir)).toBe(0o700);
    expect(await mode(store.pathFor("t:3"))).toBe(0o600);
    await store.compact(s);
    expect(await mode(store.pathFor("t:3"))).toBe(0o600);
    await store.clear(s);
    expect(await mode(store.pathFor("t:3"))).toBe(0o600);
  });

  it("appends without reading or rewriting: earlier bytes and inode stay", async () => {
    const store = new SessionStore(sessionsDir);
    const s = await store.get("t:2");
    await store.append(s, [{ role: "user", content: "first" }]);
    const path = store.pathFor("t:2");
    const before = await readFile(path);
    const { ino } = await stat(path);
    for (let i = 0; i < 5; i++) await store.append(s, [{ role: "user", content: `m${i}` }]);
    const after = await readFile(path);
    expect((await stat(path)).ino).toBe(ino);
    expect(after.subarray(0, before.length).equals(before)).toBe(true);
    expect(await lines(path)).toHaveLength(1 + 6);
  });

  it("serialises concurrent appends: no interleaved lines, call order kept", async () => {
    const store = new SessionStore(sessionsDir);
    const s = await store.get("t:3");
    const big = "x".repeat(200_000); // larger than one write chunk
    await Promise.all(
      Array.from({ length: 40 }, (_, i) => store.append(s, [{ role: "user", content: `${i}:${big}` }])),
    );
    const fileLines = await lines(store.pathFor("t:3"));
    expect(fileLines).toHaveLength(41);
    const contents = fileLines.slice(1).map((l) => (JSON.parse(l) as ChatMessage).content as string);
    expect(contents.map((c) => Number(c.split(":")[0]))).toEqual(Array.from({ length: 40 }, (_, i) => i));
    expect(contents.every((c) => c.endsWith(big))).toBe(true);
  });

  it("returns one instance for concurrent gets of the same key", async () => {
    await mkdir(sessionsDir, { recursive: true });
    await copyFile(FIXTURE, join(sessionsDir, "telegram_12345.jsonl"));
    const store = new SessionStore(sessionsDir);
    const [a, b] = await Promise.all([store.get("telegram:12345"), store.get("telegram:12345")]);
    expect(a).toBe(b);
    expect(await store.get("telegram:12345")).toBe(a);
    expect(await store.get("other:1")).not.toBe(a);
    store.invalidate("telegram:12345");
    expect(await store.get("telegram:12345")).not.toBe(a);
  });

  it("saveMetadata appends a metadata line; the last one wins", async () => {
    const store = new SessionStore(sessionsDir);
    const s = await store.get("t:4");
    await store.append(s, [
      { role: "user", content: "a" },
      { role: "assistant", content: "b" },
    ]);
    const path = store.pathFor("t:4");
    const before = await readFile(path);
    s.lastConsolidated = 2;
    s.metadata = { n: 1 };
    await store.saveMetadata(s);
    s.metadata = { n: 2 };
    await store.saveMetadata(s);
    const after = await readFile(path);
    expect(after.subarray(0, before.length).equals(before)).toBe(true);
    const all = (await lines(path)).map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(all.filter((l) => l._type === "metadata")).toHaveLength(3);
    expect(Object.keys(all.at(-1)!)).toEqual(NANOBOT_METADATA_KEYS);
    const again = await new SessionStore(sessionsDir).get("t:4");
    expect(again.metadata).toEqual({ n: 2 });
    expect(again.lastConsolidated).toBe(2);
    expect(again.messages).toHaveLength(2);
  });

  it("saveMetadata on a new session creates the file with just the metadata line", async () => {
    const store = new SessionStore(sessionsDir);
    const s = await store.get("t:new");
    s.metadata = { x: true };
    await store.saveMetadata(s);
    const all = await lines(store.pathFor("t:new"));
    expect(all).toHaveLength(1);
    expect(JSON.parse(all[0]!)).toMatchObject({ _type: "metadata", metadata: { x: true } });
  });

  it("clear atomically replaces the file with one fresh metadata line", async () => {
    const store = new SessionStore(sessionsDir);
    const s = await store.get("t:5");
    await store.append(s, [
      { role: "user", content: "a" },
      { role: "assistant", content: "b" },
    ]);
    s.lastConsolidated = 1;
    s.metadata = { keep: "me" };
    await store.saveMetadata(s);
    await store.clear(s);
    expect(s.messages).toEqual([]);
    expect(s.lastConsolidated).toBe(0);
    const all = await lines(store.pathFor("t:5"));
    expect(all).toHaveLength(1);
    expect(JSON.parse(all[0]!)).toMatchObject({ _type: "metadata", key: "t:5", last_consolidated: 0 });
    expect(await readdir(sessionsDir)).toEqual(["t_5.jsonl"]); // no temp file left

    const again = await new SessionStore(sessionsDir).get("t:5");
    expect(again.messages).toEqual([]);
    expect(again.lastConsolidated).toBe(0);
    expect(again.metadata).toEqual({ keep: "me" });

    // Appends after a clear go to the new file.
    await store.append(s, [{ role: "user", content: "fresh" }]);
    expect((await new SessionStore(sessionsDir).get("t:5")).messages.map((m) => m.content)).toEqual([
      "fresh",
    ]);
  });

  it("compact folds metadata lines into one and keeps every message", async () => {
    const store = new SessionStore(sessionsDir);
    const s = await store.get("t:6");
    for (let i = 0; i < 3; i++) {
      await store.append(s, [{ role: "user", content: `q${i}` }]);
      s.lastConsolidated = i;
      await store.saveMetadata(s);
    }
    const path = store.pathFor("t:6");
    expect(await lines(path)).toHaveLength(1 + 3 + 3);
    const compacting = store.compact(s);
    const late = store.append(s, [{ role: "user", content: "after" }]); // queued behind the rewrite
    await Promise.all([compacting, late]);
    const all = (await lines(path)).map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(all.filter((l) => l._type === "metadata")).toHaveLength(1);
    expect(all[0]).toMatchObject({ _type: "metadata", last_consolidated: 2 });
    expect(all.slice(1).map((l) => l.content)).toEqual(["q0", "q1", "q2", "after"]);
    expect(await readdir(sessionsDir)).toEqual(["t_6.jsonl"]);
  });

  it("creates the sessions folder on demand and lists and counts sessions", async () => {
    const store = new SessionStore(join(sessionsDir, "nested"));
    expect(await store.count()).toBe(0);
    expect(await store.list()).toEqual([]);
    const a = await store.get("telegram:1");
    await store.append(a, [{ role: "user", content: "a" }]);
    // Written an hour before b: a clock step, not a sleep that hopes the file times differ.
    const anHourAgo = new Date(Date.now() - 3_600_000);
    await utimes(store.pathFor("telegram:1"), anHourAgo, anHourAgo);
    const b = await store.get("slack:C1:17.5");
    await store.append(b, [{ role: "user", content: "b" }]);
    expect(await store.count()).toBe(2);
    const list = await store.list();
    expect(list.map((i) => i.key)).toEqual(["slack:C1:17.5", "telegram:1"]);
    expect(list[1]!.path).toBe(store.pathFor("telegram:1"));
    expect(list[0]!.updatedAt.getTime()).toBeGreaterThan(list[1]!.updatedAt.getTime());
  });

  it("remove deletes the session's file after the writes queued before it and forgets the copy in memory", async () => {
    const store = new SessionStore(sessionsDir);
    const gone = await store.get("cron:abc");
    await store.append(gone, [{ role: "user", content: "first" }]);
    const kept = await store.get("slack:C1");
    await store.append(kept, [{ role: "user", content: "stays" }]);
    expect(store.openFiles).toBe(2);
    // Queued, not awaited: the remove must come after it, or the append would write the file again.
    const late = store.append(gone, [{ role: "assistant", content: "late" }]);
    await Promise.all([late, store.remove("cron:abc")]);
    expect(await readdir(sessionsDir)).toEqual(["slack_C1.jsonl"]);
    expect(store.openFiles).toBe(1); // no handle left on the deleted file
    const fresh = await store.get("cron:abc");
    expect(fresh).not.toBe(gone);
    expect(fresh.messages).toEqual([]);
    expect((await store.get("slack:C1")).messages.map((m) => m.content)).toEqual(["stays"]);
    // A session never stored: nothing to delete, no error.
    await store.remove("cron:never");
    // Written again, it is a new file: a metadata line and the new message only.
    await store.append(fresh, [{ role: "user", content: "again" }]);
    const again = await lines(store.pathFor("cron:abc"));
    expect(again).toHaveLength(2);
    expect(JSON.parse(again[0]!)).toMatchObject({ _type: "metadata", key: "cron:abc" });
    expect(JSON.parse(again[1]!)).toMatchObject({ content: "again" });
    await store.close();
  });

  it("remove that cannot delete the file rejects with its path", async () => {
    await mkdir(sessionsDir, { recursive: true });
    const store = new SessionStore(sessionsDir);
    // A folder where the file should be: unlink refuses it (not ENOENT).
    await mkdir(store.pathFor("cron:dir"));
    await expect(store.remove("cron:dir")).rejects.toThrow(/cannot delete session file .*cron_dir\.jsonl/);
    await store.close();
  });

  it("a failed write rejects that call only; later writes still happen", async () => {
    await mkdir(sessionsDir, { recursive: true });
    const store = new SessionStore(sessionsDir);
    const s = await store.get("t:7");
    // A folder where the file should be makes the append fail.
    await mkdir(store.pathFor("t:7"));
    await expect(store.append(s, [{ role: "user", content: "lost" }])).rejects.toThrow(/t_7\.jsonl/);
    await rm(store.pathFor("t:7"), { recursive: true });
    await store.append(s, [{ role: "user", content: "kept" }]);
    const again = await new SessionStore(sessionsDir).get("t:7");
    expect(again.messages.map((m) => m.content)).toEqual(["kept"]);
  });
});

describe("SessionStore append handles", () => {
  const contents = async (store: SessionStore, key: string) =>
    (await new SessionStore(sessionsDir, captureLog().log).get(key)).messages.map((m) => m.content);

  it("keeps a session file open between appends and closes every one on close()", async () => {
    const store = new SessionStore(sessionsDir);
    const s = await store.get("t:1");
    await store.append(s, [{ role: "user", content: "a" }]);
    expect(store.openFiles).toBe(1);
    const { ino } = await stat(store.pathFor("t:1"));
    await store.append(s, [{ role: "assistant", content: "b" }]);
    expect(store.openFiles).toBe(1);
    expect((await stat(store.pathFor("t:1"))).ino).toBe(ino);
    await store.close();
    expect(store.openFiles).toBe(0);
    // A store closed at shutdown still works if used again: the file is opened afresh.
    await store.append(s, [{ role: "user", content: "c" }]);
    expect(await contents(store, "t:1")).toEqual(["a", "b", "c"]);
    await store.close();
  });

  it("holds a file open for each of 100 chats writing at once by default (no eviction per append)", async () => {
    const store = new SessionStore(sessionsDir);
    const sessions = await Promise.all(Array.from({ length: 100 }, (_, i) => store.get(`t:${i}`)));
    await Promise.all(sessions.map((s) => store.append(s, [{ role: "user", content: "a" }])));
    expect(store.openFiles).toBe(100);
    await store.close();
  });

  it("holds at most maxOpenFiles, closing the least recently used; nothing is lost", async () => {
    const store = new SessionStore(sessionsDir, undefined, { maxOpenFiles: 2 });
    const keys = ["t:1", "t:2", "t:3", "t:4"];
    const sessions = await Promise.all(keys.map((k) => store.get(k)));
    for (let round = 0; round < 3; round++) {
      await Promise.all(
        sessions.map((s) => store.append(s, [{ role: "user", content: `${s.key} ${round}` }])),
      );
      await store.flush();
      expect(store.openFiles).toBeLessThanOrEqual(2);
    }
    for (const key of keys) expect(await contents(store, key)).toEqual([0, 1, 2].map((r) => `${key} ${r}`));
    await store.close();
  });

  it("appends to many sessions at once with few handles: none lost, none to a closed file", async () => {
    const store = new SessionStore(sessionsDir, undefined, { maxOpenFiles: 3 });
    const sessions = await Promise.all(Array.from({ length: 30 }, (_, i) => store.get(`t:${i}`)));
    // Staggered, so that handles are evicted while other appends are checking theirs.
    const appends: Promise<void>[] = [];
    for (let round = 0; round < 5; round++) {
      for (const s of sessions) {
        appends.push(store.append(s, [{ role: "user", content: `${round}` }]));
        if (appends.length % 7 === 0) await new Promise((r) => setImmediate(r));
      }
    }
    await Promise.all(appends);
    for (const s of sessions) expect(await contents(store, s.key)).toEqual(["0", "1", "2", "3", "4"]);
    await store.close();
  });

  it("closes a file left idle", async () => {
    const store = new SessionStore(sessionsDir, undefined, { idleCloseMs: 20 });
    const s = await store.get("t:1");
    await store.append(s, [{ role: "user", content: "a" }]);
    await waitFor(() => store.openFiles === 0, 5000);
    await store.append(s, [{ role: "user", content: "b" }]);
    expect(await contents(store, "t:1")).toEqual(["a", "b"]);
    await store.close();
  });

  it("follows the file when it is deleted or replaced under the open handle (checked every recheckOpenFilesMs)", async () => {
    const store = new SessionStore(sessionsDir, undefined, { recheckOpenFilesMs: 0 });
    const s = await store.get("t:1");
    await store.append(s, [{ role: "user", content: "a" }]);
    // Deleted (a removed cron job's session): the next append makes a new file, metadata first.
    await unlink(store.pathFor("t:1"));
    await store.append(s, [{ role: "user", content: "b" }]);
    const after = await lines(store.pathFor("t:1"));
    expect(JSON.parse(after[0]!)).toMatchObject({ _type: "metadata", key: "t:1" });
    expect(await contents(store, "t:1")).toEqual(["b"]);
    // Replaced by a rename (another writer's atomic rewrite): appends go to the new file.
    const other = join(dir, "other.jsonl");
    await writeFile(
      other,
      `${JSON.stringify({ _type: "metadata", key: "t:1" })}\n${JSON.stringify({ role: "user", content: "x" })}\n`,
    );
    await rename(other, store.pathFor("t:1"));
    await store.append(s, [{ role: "user", content: "c" }]);
    expect(await contents(store, "t:1")).toEqual(["x", "c"]);
    await store.close();
  });

  it("loads well-formed lines as they are and repairs the rest through the schema", async () => {
    await mkdir(sessionsDir, { recursive: true });
    const call = { id: "c1", function: { name: "read_file", arguments: { path: "a.txt" } } };
    await writeFile(
      join(sessionsDir, "t_9.jsonl"),
      [
        JSON.stringify({ _type: "metadata", key: "t:9", last_consolidated: 1 }),
        JSON.stringify({ role: "user", content: "hi", timestamp: "2025-01-01T00:00:00.000000" }),
        JSON.stringify({ role: "assistant", content: null, tool_calls: [call] }),
        JSON.stringify({ role: "tool", tool_call_id: "c1", name: "read_file", content: "text" }),
        "",
      ].join("\r\n"),
    );
    const s = await new SessionStore(sessionsDir).get("t:9");
    expect(s.lastConsolidated).toBe(1);
    expect(s.messages).toEqual([
      { role: "user", content: "hi", timestamp: "2025-01-01T00:00:00.000000" },
      {
        role: "assistant",
        content: null,
        tool_calls: [
          { id: "c1", type: "function", function: { name: "read_file", arguments: '{"path":"a.txt"}' } },
        ],
      },
      { role: "tool", tool_call_id: "c1", name: "read_file", content: "text" },
    ]);
  });
});

describe("SessionStore sessions in memory", () => {
  const texts = (s: { messages: ChatMessage[] }) => s.messages.map((m) => m.content);

  it("holds at most keepSessions itself; a session still in use stays the one instance", async () => {
    const store = new SessionStore(sessionsDir, undefined, { keepSessions: 3 });
    // Held here as a running turn or consolidation holds it, across many other chats' turns.
    const held = await store.get("t:held");
    await store.append(held, [{ role: "user", content: "a" }]);
    for (let i = 0; i < 20; i++) {
      const s = await store.get(`t:${i}`);
      await store.append(s, [{ role: "user", content: `m${i}` }]);
    }
    await store.flush();
    expect(store.heldSessions).toBeLessThanOrEqual(3);
    const again = await store.get("t:held");
    expect(again).toBe(held);
    await store.append(again, [{ role: "assistant", content: "b" }]);
    expect(texts(held)).toEqual(["a", "b"]);
    // One let go of comes back from its file with everything.
    expect(texts(await store.get("t:7"))).toEqual(["m7"]);
    await store.close();
  });

  it("gives concurrent gets of many keys one instance each, past keepSessions", async () => {
    const store = new SessionStore(sessionsDir, undefined, { keepSessions: 1 });
    const keys = ["t:1", "t:2", "t:3", "t:4"];
    const first = await Promise.all(keys.map((k) => store.get(k)));
    const second = await Promise.all(keys.map((k) => store.get(k)));
    for (const [i, s] of first.entries()) expect(second[i]).toBe(s);
    expect(store.heldSessions).toBe(1);
    await store.close();
  });
});
