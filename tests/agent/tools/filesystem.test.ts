import { chmod, mkdir, readFile, stat, symlink, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import {
  LIST_DIR_MAX_ENTRIES,
  createFilesystemTools,
  findClosestMatch,
  truncateWithNotice,
} from "../../../src/agent/tools/filesystem.js";
import { ToolRegistry } from "../../../src/agent/tools/registry.js";
import type { ToolCall } from "../../../src/llm/types.js";
import { TempDirs, makeContext } from "./helpers.js";

function call(name: string, args: Record<string, unknown>): ToolCall {
  return { id: "c1", name, arguments: args, rawArguments: JSON.stringify(args) };
}

describe("filesystem tools", () => {
  const temps = new TempDirs();
  let root: string;
  let ws: string;
  let outside: string;

  function registry(opts: { restrict?: boolean; maxChars?: number } = {}): ToolRegistry {
    const reg = new ToolRegistry();
    for (const tool of createFilesystemTools({
      workspace: ws,
      restrictToWorkspace: opts.restrict ?? true,
      readFileMaxChars: opts.maxChars ?? 1000,
    })) {
      reg.register(tool);
    }
    return reg;
  }
  async function run(
    name: string,
    args: Record<string, unknown>,
    opts?: { restrict?: boolean; maxChars?: number },
  ) {
    return registry(opts).execute(call(name, args), makeContext({ workspace: ws }).ctx);
  }

  beforeEach(async () => {
    root = await temps.make();
    ws = join(root, "ws");
    outside = join(root, "outside");
    await mkdir(ws);
    await mkdir(outside);
    await writeFile(join(outside, "secret.txt"), "top secret");
  });
  afterEach(() => temps.cleanup());

  it("exposes nanobot's names and parameters", () => {
    const defs = registry().definitions();
    expect(defs.map((d) => d.function.name)).toEqual(["read_file", "write_file", "edit_file", "list_dir"]);
    const edit = defs.find((d) => d.function.name === "edit_file")!.function.parameters as {
      properties: Record<string, { description?: string }>;
      required: string[];
    };
    expect(Object.keys(edit.properties)).toEqual(["path", "old_text", "new_text"]);
    expect(edit.required).toEqual(["path", "old_text", "new_text"]);
    expect(edit.properties.old_text!.description).toMatch(/exact text/);
  });

  describe("read_file", () => {
    it("reads a text file relative to the workspace", async () => {
      await writeFile(join(ws, "a.txt"), "hello\nworld\n");
      expect(await run("read_file", { path: "a.txt" })).toBe("hello\nworld\n");
    });

    it("caps long files with a visible notice", async () => {
      await writeFile(join(ws, "big.txt"), "x".repeat(250));
      const out = await run("read_file", { path: "big.txt" }, { maxChars: 100 });
      expect(out.startsWith("x".repeat(100) + "\n")).toBe(true);
      expect(out).not.toContain("x".repeat(101));
      expect(out).toContain("[truncated: showing 100 of 250 characters]");
    });

    it("names the path when the file does not exist", async () => {
      expect(await run("read_file", { path: "nope/missing.md" })).toBe(
        "Error: file not found: nope/missing.md",
      );
    });

    it("refuses directories and binary files", async () => {
      await mkdir(join(ws, "d"));
      await writeFile(join(ws, "bin.dat"), Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x00, 0x01, 0x02]));
      expect(await run("read_file", { path: "d" })).toMatch(/^Error: d is a directory.*list_dir/);
      expect(await run("read_file", { path: "bin.dat" })).toMatch(
        /^Error: bin\.dat looks like a binary file/,
      );
    });

    it("says when a file is empty", async () => {
      await writeFile(join(ws, "empty.txt"), "");
      expect(await run("read_file", { path: "empty.txt" })).toMatch(/empty/);
    });

    it("refuses traversal, absolute paths and symlink escapes when restricted", async () => {
      await symlink(outside, join(ws, "link"));
      await symlink(join(outside, "secret.txt"), join(ws, "secret-link.txt"));
      for (const path of [
        "../outside/secret.txt",
        join(outside, "secret.txt"),
        "link/secret.txt",
        "secret-link.txt",
      ]) {
        const out = await run("read_file", { path });
        expect(out, path).toMatch(/^Error: access denied: .*outside the workspace/);
        expect(out).not.toContain("top secret");
      }
      expect(await run("read_file", { path: "/etc/passwd" })).toMatch(/^Error: access denied/);
    });

    it("allows the same paths when not restricted", async () => {
      await symlink(outside, join(ws, "link"));
      expect(await run("read_file", { path: "../outside/secret.txt" }, { restrict: false })).toBe(
        "top secret",
      );
      expect(await run("read_file", { path: "link/secret.txt" }, { restrict: false })).toBe("top secret");
    });
  });

  describe("write_file", () => {
    it("creates new files 0600 in new folders 0700, and keeps an existing file's mode", async () => {
      await run("write_file", { path: "private/notes.md", content: "mine" });
      expect((await stat(join(ws, "private"))).mode & 0o777).toBe(0o700);
      expect((await stat(join(ws, "private", "notes.md"))).mode & 0o777).toBe(0o600);
      await writeFile(join(ws, "script.sh"), "#!/bin/sh\n", { mode: 0o755 });
      await chmod(join(ws, "script.sh"), 0o755);
      await run("write_file", { path: "script.sh", content: "#!/bin/sh\necho hi\n" });
      expect((await stat(join(ws, "script.sh"))).mode & 0o777).toBe(0o755);
    });
    it("creates parent folders and reports bytes written", async () => {
      const out = await run("write_file", { path: "notes/day/1.md", content: "héllo" });
      expect(out).toBe("Wrote 6 bytes to notes/day/1.md");
      expect(await readFile(join(ws, "notes/day/1.md"), "utf8")).toBe("héllo");
    });

    it("refuses to write through a symlink that leaves the workspace, or outside it", async () => {
      await symlink(outside, join(ws, "link"));
      await symlink(join(outside, "created.txt"), join(ws, "dangling.txt"));
      expect(await run("write_file", { path: "link/evil.txt", content: "x" })).toMatch(
        /^Error: access denied/,
      );
      expect(await run("write_file", { path: "dangling.txt", content: "x" })).toMatch(
        /^Error: access denied/,
      );
      expect(await run("write_file", { path: "../outside/evil.txt", content: "x" })).toMatch(
        /^Error: access denied/,
      );
      await expect(readFile(join(outside, "evil.txt"))).rejects.toThrow();
      await expect(readFile(join(outside, "created.txt"))).rejects.toThrow();
    });

    it("writes through the symlink when not restricted", async () => {
      await symlink(outside, join(ws, "link"));
      await run("write_file", { path: "link/ok.txt", content: "fine" }, { restrict: false });
      expect(await readFile(join(outside, "ok.txt"), "utf8")).toBe("fine");
    });

    it("refuses to overwrite a directory", async () => {
      await mkdir(join(ws, "d"));
      expect(await run("write_file", { path: "d", content: "x" })).toMatch(/^Error: d is a directory/);
    });
  });

  describe("edit_file", () => {
    it("replaces the one exact match, keeping $ patterns literal", async () => {
      await writeFile(join(ws, "f.txt"), "one\ntwo\nthree\n");
      const out = await run("edit_file", { path: "f.txt", old_text: "two", new_text: "2 $& $1" });
      expect(out).toBe("Edited f.txt: replaced 1 occurrence at line 2.");
      expect(await readFile(join(ws, "f.txt"), "utf8")).toBe("one\n2 $& $1\nthree\n");
    });

    it("counts multiple matches and asks for more context", async () => {
      await writeFile(join(ws, "f.txt"), "x = 1\ny = 2\nx = 1\nx = 1\n");
      const out = await run("edit_file", { path: "f.txt", old_text: "x = 1", new_text: "x = 9" });
      expect(out).toMatch(/appears 3 times in f\.txt/);
      expect(out).toMatch(/more surrounding lines/);
      expect(await readFile(join(ws, "f.txt"), "utf8")).toBe("x = 1\ny = 2\nx = 1\nx = 1\n");
    });

    it("shows the closest region with line numbers when old_text is not found", async () => {
      const lines = [
        "import os",
        "",
        "def greet(name):",
        '    print("hello", name)',
        "    return name",
        "",
        "def other():",
        "    pass",
      ];
      await writeFile(join(ws, "g.py"), lines.join("\n"));
      const out = await run("edit_file", {
        path: "g.py",
        old_text: 'def greet(name):\n  print("hello", name)',
        new_text: "x",
      });
      expect(out).toMatch(
        /^Error: old_text was not found in g\.py\. The closest match is lines 3-4 \(identical except for whitespace\)/,
      );
      expect(out).toContain('3| def greet(name):\n4|     print("hello", name)');
      expect(await readFile(join(ws, "g.py"), "utf8")).toBe(lines.join("\n"));
    });

    it("says so when nothing similar exists", async () => {
      await writeFile(join(ws, "f.txt"), "aaaa\nbbbb\n");
      const out = await run("edit_file", { path: "f.txt", old_text: "zzzz qqqq", new_text: "x" });
      expect(out).toMatch(/Nothing in the file looks similar/);
    });

    it("adapts \\n to a CRLF file", async () => {
      await writeFile(join(ws, "w.txt"), "a\r\nb\r\nc\r\n");
      await run("edit_file", { path: "w.txt", old_text: "a\nb", new_text: "A\nB" });
      expect(await readFile(join(ws, "w.txt"), "utf8")).toBe("A\r\nB\r\nc\r\n");
    });

    it("refuses files outside the workspace when restricted", async () => {
      const out = await run("edit_file", { path: "../outside/secret.txt", old_text: "top", new_text: "no" });
      expect(out).toMatch(/^Error: access denied/);
      expect(await readFile(join(outside, "secret.txt"), "utf8")).toBe("top secret");
    });
  });

  describe("list_dir", () => {
    it("lists entries sorted with folders marked", async () => {
      await mkdir(join(ws, "b-dir"));
      await writeFile(join(ws, "c.txt"), "");
      await writeFile(join(ws, "a.txt"), "");
      await symlink(join(ws, "b-dir"), join(ws, "d-link"));
      expect(await run("list_dir", { path: "." })).toBe("a.txt\nb-dir/\nc.txt\nd-link/");
    });

    it("bounds the number of entries with a notice", async () => {
      const n = LIST_DIR_MAX_ENTRIES + 7;
      await mkdir(join(ws, "many"));
      await Promise.all(
        Array.from({ length: n }, (_, i) =>
          writeFile(join(ws, "many", `f${String(i).padStart(4, "0")}`), ""),
        ),
      );
      const out = (await run("list_dir", { path: "many" })).split("\n");
      expect(out).toHaveLength(LIST_DIR_MAX_ENTRIES + 1);
      expect(out[0]).toBe("f0000");
      expect(out.at(-1)).toBe(`[truncated: showing ${LIST_DIR_MAX_ENTRIES} of ${n} entries]`);
    });

    it("explains missing folders, files and escapes", async () => {
      await writeFile(join(ws, "f.txt"), "");
      expect(await run("list_dir", { path: "nope" })).toBe("Error: directory not found: nope");
      expect(await run("list_dir", { path: "f.txt" })).toMatch(/is a file, not a directory/);
      expect(await run("list_dir", { path: ".." })).toMatch(/^Error: access denied/);
      expect(await run("list_dir", { path: ".." }, { restrict: false })).toBe("outside/\nws/");
    });
  });

  describe("helpers", () => {
    it("truncateWithNotice never splits a surrogate pair", () => {
      const out = truncateWithNotice("ab😀cd", 3);
      expect(out.startsWith("ab\n")).toBe(true);
      expect(out).toContain("[truncated: showing 2 of 6 characters]");
      expect(truncateWithNotice("short", 10)).toBe("short");
    });

    it("findClosestMatch finds the most similar window", () => {
      const text = "alpha\nbeta\ngamma\ndelta\n";
      expect(findClosestMatch(text, "gamma!\ndelta")).toMatchObject({ start: 2, end: 4 });
    });
  });
});
