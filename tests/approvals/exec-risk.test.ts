import { describe, expect, it } from "vitest";
import {
  hasShellMetacharacters,
  isReadOnlyCommand,
  plainWords,
  programOf,
  shellWords,
} from "../../src/approvals/exec-risk.js";
import { longNames } from "../../src/approvals/gnu-options.js";
import { READ_ONLY_PROGRAMS } from "../../src/approvals/read-only-programs.js";

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

  it("tells a glob that may expand to an option from one that cannot", () => {
    const globs = (cmd: string) => shellWords(cmd)!.map((w) => w.optionGlob);
    expect(globs("wc -l *.md ./* notes/*.md '*' \\* \"-*\" x? [a]b")).toEqual([
      false,
      false,
      true,
      false,
      false,
      false,
      false,
      false,
      false,
      true,
    ]);
    expect(globs("x ? [-]* {--a,b} a{,--b} {} '{a,b}'")).toEqual([
      false,
      true,
      true,
      true,
      false,
      false,
      false,
    ]);
  });
});

describe("isReadOnlyCommand", () => {
  it.each([
    "ls -la",
    "cat notes.md",
    'grep -rn "TODO: fix" src',
    "head -n 5 x",
    "tail -f log",
    "wc -l x",
    "pwd",
    "echo hello world",
    "find . -name '*.md' -type f",
    "stat x",
    "file x",
    "du -sh .",
    "df -h",
    "whoami",
    "uname -a",
    "which node",
    "uniq x",
    "cut -d, -f1 x",
    "diff a b",
    // Prefixes that the program resolves to a read-only option, `--`, and globs that cannot be options.
    "ls --col=never --human x",
    "grep -rn foo .",
    "grep -e --pre -- -x",
    "head -5 x",
    "tail -n -5 x",
    "wc -l notes/*.md ./*.txt",
    "cat -- --compress-program=sh",
    "cat '*' \\?",
    "diff -u a b",
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

describe("isReadOnlyCommand: the spellings that talked it around (issue 33)", () => {
  it.each([
    // GNU tools take any unambiguous prefix of a long option.
    "sort -S 1k --compress-prog=sh big.txt",
    "sort -S 1k --compress-program=sh big.txt",
    "sort --out=x y",
    "sort -u x", // sort is off the list: it runs programs and writes files by design
    "date --se=2020-01-01",
    "date --set 2020-01-01",
    "date -s 2020-01-01",
    "date", // off the list: its one write sets the machine's clock
    "file --comp -m magic",
    "file --compile -m magic",
    "file -C -m magic",
    "file --no-s x",
    "file -p x",
    "file --pre x",
    "diff --pag a b",
    "diff -l a b",
    "uniq a out",
    "uniq -c a out",
    "uniq -f 1 a out",
    // Unknown and ambiguous options ask.
    "ls --co", // color, context
    "ls --frobnicate",
    "grep --pre=sh x",
    "grep --e x", // exclude, exclude-dir, exclude-from, extended-regexp
    "cat -y x",
    "head -N x",
    // A file in the workspace named like an option reaches the command only through a glob.
    "sort *",
    "ls *",
    "cat -- *",
    "wc -l *.md",
    "cat ?-compress-program=sh",
    "cat [-]*",
    "head {--compress-program=sh,x}",
    "grep foo *",
    "find * -name x",
    "find . -name *.md",
    "echo `ls *`",
    // find: primaries that run or write, and primaries it does not know (no abbreviations in find).
    "find . -maxdepth 0 -exec touch X {} +",
    "find . -exe touch X {} +",
    "find . -fls out",
    "find . -fprint0 out",
    "find . -newerXY x",
  ])("%j asks", (cmd) => {
    expect(isReadOnlyCommand(cmd)).toBe(false);
  });
});

/**
 * Every long option each listed program's `--help` shows (GNU coreutils 9.1, grep 3.8, diffutils
 * 3.8, file 5.44), kept here apart from the source's table, so that an option the table forgot
 * fails the fuzz below: a prefix of it might otherwise resolve to a read-only one.
 */
const HELP_LONG: Record<string, string> = {
  ls: "all almost-all author block-size classify color context dereference dereference-command-line dereference-command-line-symlink-to-dir directory dired escape file-type format full-time group-directories-first help hide hide-control-chars human-readable hyperlink ignore ignore-backups indicator-style inode kibibytes literal no-group numeric-uid-gid quote-name quoting-style recursive reverse show-control-chars si size sort tabsize time time-style version width zero",
  cat: "help number number-nonblank show-all show-ends show-nonprinting show-tabs squeeze-blank version",
  head: "bytes help lines quiet silent verbose version zero-terminated",
  tail: "bytes follow help lines max-unchanged-stats pid quiet retry silent sleep-interval verbose version zero-terminated",
  grep: "after-context basic-regexp before-context binary binary-files byte-offset color colour context count dereference-recursive devices directories exclude exclude-dir exclude-from extended-regexp file files-with-matches files-without-match fixed-strings group-separator help ignore-case include initial-tab invert-match label line-buffered line-number line-regexp max-count no-filename no-group-separator no-ignore-case no-messages null null-data only-matching perl-regexp quiet recursive regexp silent text version with-filename word-regexp",
  wc: "bytes chars files0-from help lines max-line-length version words",
  stat: "cached dereference file-system format help printf terse version",
  file: "apple brief checking-printout compile debug dereference exclude exclude-quiet extension files-from help keep-going list magic-file mime mime-encoding mime-type no-buffer no-dereference no-pad no-sandbox parameter preserve-date print0 raw separator special-files uncompress uncompress-noreport version",
  du: "all apparent-size block-size bytes count-links dereference dereference-args exclude exclude-from files0-from help human-readable inodes max-depth no-dereference null one-file-system separate-dirs si summarize threshold time time-style total version",
  df: "all block-size exclude-type help human-readable inodes local no-sync output portability print-type si sync total type version",
  whoami: "help version",
  uname:
    "all hardware-platform help kernel-name kernel-release kernel-version machine nodename operating-system processor version",
  uniq: "all-repeated check-chars count group help ignore-case repeated skip-chars skip-fields unique version zero-terminated",
  cut: "bytes characters complement delimiter fields help only-delimited output-delimiter version zero-terminated",
  diff: "brief changed-group-format color context ed exclude exclude-from expand-tabs from-file help horizon-lines ifdef ignore-all-space ignore-blank-lines ignore-case ignore-file-name-case ignore-matching-lines ignore-space-change ignore-tab-expansion ignore-trailing-space initial-tab label left-column line-format minimal new-file new-group-format new-line-format no-dereference no-ignore-file-name-case normal old-group-format old-line-format paginate palette rcs recursive report-identical-files show-c-function show-function-line side-by-side speed-large-files starting-file strip-trailing-cr suppress-blank-empty suppress-common-lines tabsize text to-file unchanged-group-format unchanged-line-format unidirectional-new-file unified version width",
  egrep: "",
  fgrep: "",
  // Off the list, with the options that made them so among these.
  sort: "batch-size buffer-size check compress-program debug dictionary-order field-separator files0-from general-numeric-sort help human-numeric-sort ignore-case ignore-leading-blanks ignore-nonprinting key merge month-sort numeric-sort output parallel random-sort random-source reverse sort stable temporary-directory unique version version-sort zero-terminated",
  date: "date debug file help iso-8601 reference resolution rfc-3339 rfc-email set universal utc version",
  which: "",
  pwd: "",
};

describe("isReadOnlyCommand: a fuzz of every long-option prefix and short letter", () => {
  // egrep and fgrep are grep -E and grep -F.
  for (const alias of ["egrep", "fgrep"]) HELP_LONG[alias] = HELP_LONG.grep!;
  const programs = Object.keys(HELP_LONG);

  it("covers every listed program", () => {
    for (const program of Object.keys(READ_ONLY_PROGRAMS)) expect(programs).toContain(program);
  });

  it.each(programs)("%s: every prefix of an option off its allow-list asks", (program) => {
    const all = HELP_LONG[program]!.split(" ").filter((o) => o !== "");
    const table = READ_ONLY_PROGRAMS[program];
    const allowed = table ? [...longNames(table).readOnly.keys()] : [];
    let checked = 0;
    for (const option of all.filter((o) => !allowed.includes(o))) {
      for (let end = 1; end <= option.length; end++) {
        const prefix = option.slice(0, end);
        // The program takes an exact name over a prefix: `--time` is ls's own --time, not --time-style.
        if (allowed.includes(prefix)) continue;
        for (const spelling of [`--${prefix}`, `--${prefix}=sh`]) {
          expect(isReadOnlyCommand(`${program} ${spelling} x`), `${program} ${spelling}`).toBe(false);
          checked++;
        }
      }
    }
    // Only programs whose every long option is read-only have nothing to check.
    if (all.some((o) => !allowed.includes(o))) expect(checked).toBeGreaterThan(0);
  });

  it.each(programs)("%s: every short option off its allow-list asks, alone or in a cluster", (program) => {
    const short = READ_ONLY_PROGRAMS[program]?.short.replace(/:/g, "") ?? "";
    const letters = [..."abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"];
    for (const letter of letters.filter((l) => !short.includes(l))) {
      expect(isReadOnlyCommand(`${program} -${letter} x`), `${program} -${letter}`).toBe(false);
      const flag = [...short].find((l) => !READ_ONLY_PROGRAMS[program]!.short.includes(`${l}:`));
      if (flag) expect(isReadOnlyCommand(`${program} -${flag}${letter} x`)).toBe(false);
    }
  });
});
