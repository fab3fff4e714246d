import { describe, expect, it } from "vitest";
import {
  hasShellMetacharacters,
  isNarrowProgram,
  isReadOnlyCommand,
  plainWords,
  programOf,
} from "../../src/approvals/exec-risk.js";

describe("hasShellMetacharacters", () => {
  it.each([
    "ls; rm x",
    "ls && rm x",
    "ls & rm x",
    "ls | sh",
    "cat x > y",
    "cat < x",
    "echo $(rm x)",
    "echo `rm x`",
    "echo $HOME",
    "echo ${X:=y}",
    "(rm x)",
    "ls\nrm x",
    "ls\rrm x",
    'echo "$(rm x)"',
    'echo "`rm x`"',
    'echo "$HOME"',
  ])("finds one in %j", (cmd) => {
    expect(hasShellMetacharacters(cmd)).toBe(true);
  });

  it.each([
    "ls -la",
    'grep "a;b|c>d" x',
    "grep 'a $HOME `x` ; |' x",
    "echo a\\;b",
    "echo \\$HOME",
    'echo "\\$HOME"',
    "find . \\( -name a -o -name b \\)",
    "ls *.txt ~/x",
  ])("finds none in %j", (cmd) => {
    expect(hasShellMetacharacters(cmd)).toBe(false);
  });

  it("counts a newline even inside quotes", () => {
    expect(hasShellMetacharacters("echo 'a\nb'")).toBe(true);
  });
});

describe("plainWords and programOf", () => {
  it("splits like sh, quotes removed", () => {
    expect(plainWords(`grep "a b" 'c d' e\\ f ""`)).toEqual(["grep", "a b", "c d", "e f", ""]);
    expect(plainWords("  ls   -la  ")).toEqual(["ls", "-la"]);
  });

  it("is null for an unterminated quote, a trailing backslash or nothing", () => {
    expect(plainWords('grep "a b x')).toBeNull();
    expect(plainWords("grep 'a b x")).toBeNull();
    expect(plainWords("ls \\")).toBeNull();
    expect(plainWords("   ")).toBeNull();
  });

  it("names the program of a plain command only", () => {
    expect(programOf("git push origin main")).toBe("git");
    expect(programOf("'rm' -rf build")).toBe("rm");
    expect(programOf("rm -rf build; ls")).toBeNull();
    // A path may be a script the model wrote: not cut to its basename.
    expect(programOf("./ls")).toBeNull();
    expect(programOf("/bin/rm x")).toBeNull();
    expect(programOf("FOO=1 rm x")).toBeNull();
    expect(programOf("r* x")).toBeNull();
  });

  it("tells programs that run other commands", () => {
    expect(isNarrowProgram("git")).toBe(true);
    for (const p of ["sudo", "env", "xargs", "sh", "bash", "timeout"]) expect(isNarrowProgram(p)).toBe(false);
  });
});

describe("isReadOnlyCommand", () => {
  it.each([
    "ls -la",
    "cat notes.md",
    'grep -rn "TODO: fix" src',
    "rg -n foo",
    "head -n 5 x",
    "tail -f log",
    "wc -l x",
    "pwd",
    "date +%F",
    "date -Iseconds",
    "echo hello world",
    "find . -name '*.md' -type f",
    "stat x",
    "file x",
    "du -sh .",
    "df -h",
    "whoami",
    "uname -a",
    "which node",
    "tree -L 2",
    "sort -u x",
    "uniq x",
    "cut -d, -f1 x",
    "diff a b",
  ])("%j is read-only", (cmd) => {
    expect(isReadOnlyCommand(cmd)).toBe(true);
  });

  it.each([
    "rm -rf build",
    "touch x",
    "find . -exec rm {} \\;",
    "find . -execdir ls \\;",
    "find . -delete",
    "find . -ok rm {} \\;",
    "find . -fprint out",
    "find . -fprintf out %p",
    "sort -o out x",
    "sort -uo out x",
    "sort --output=out x",
    "sort --compress-program=sh x",
    "uniq in out",
    "tree -o out",
    "tree -R -H . -L 1",
    "date -s 2020-01-01",
    "date --set=2020-01-01",
    "file -C -m magic",
    "rg --pre sh foo",
    "git push",
    "git status", // git runs what the repository's config names (core.fsmonitor)
    "git log --oneline -5",
    "git -c core.pager=sh log",
    "git diff --output=x",
    "git diff --ext-diff",
    "git checkout .",
    "ls | sh",
    "cat x > y",
    "ls; rm x",
    "ls\nrm -rf x",
    "echo `rm x`",
    "cat $SECRET_FILE",
    "./ls",
    "/bin/ls",
    "FOO=1 ls",
    'grep "unterminated x',
    "sudo ls",
    "",
  ])("%j is not", (cmd) => {
    expect(isReadOnlyCommand(cmd)).toBe(false);
  });

  it("accepts quoted metacharacters in arguments", () => {
    expect(isReadOnlyCommand(`grep "a;b|c" x`)).toBe(true);
    expect(isReadOnlyCommand(`grep 'rm -rf $HOME' notes`)).toBe(true);
  });
});
