/**
 * The programs a command may run without a question in mode "risky", and per
 * program the options that keep it read-only (an allow-list: an option not
 * listed asks). `others` holds the rest of each program's long options as its
 * `--help` lists them (GNU coreutils 9, grep 3, diffutils 3, file 5), only so
 * that a prefix such as `--comp` resolves as the program resolves it
 * (gnu-options.ts). Data only.
 *
 * Left off on purpose:
 * - sort: it runs a program by design (`--compress-program`) and writes files
 *   (`-o`, temporaries with `-T`); a question for `sort` costs little.
 * - date: its one write (`-s`) sets the whole machine's clock.
 * - rg, tree: not installed where these lists were taken, so their options
 *   could not be checked (`rg --pre` runs a program, `tree -o` writes).
 * - git, even `git status`: git obeys the repository's own config, which can
 *   name programs (core.fsmonitor, diff.external), and the model may write it.
 */
import type { OptionTable } from "./gnu-options.js";

/** A program's allow-list, plus a check on its operands where they can write. */
export interface ReadOnlyProgram extends OptionTable {
  /** Operands that would make the call write (uniq: a second operand is its output file). */
  operandsWrite?: (operands: readonly string[]) => boolean;
}

const GREP: ReadOnlyProgram = {
  // Digits: `-5` is `-C 5`.
  short: "EFGPe:f:iywxzsvVm:bnHhoqaId:D:rRLlcTZA:B:C:NU0123456789",
  readOnly:
    "after-context= basic-regexp before-context= binary binary-files= byte-offset color[=] colour[=] " +
    "context= count dereference-recursive devices= directories= exclude-dir= exclude-from= exclude= " +
    "extended-regexp file= files-with-matches files-without-match fixed-strings group-separator= help " +
    "ignore-case include= initial-tab invert-match label= line-buffered line-number line-regexp max-count= " +
    "no-filename no-group-separator no-ignore-case no-messages null null-data only-matching perl-regexp " +
    "quiet recursive regexp= silent text version with-filename word-regexp",
  others: "",
};

export const READ_ONLY_PROGRAMS: Readonly<Record<string, ReadOnlyProgram>> = {
  ls: {
    short: "aAbBcCdDfFgGhHiI:klLmnNopqQrRsStT:uUvw:xXZ1",
    readOnly:
      "all almost-all author block-size= classify[=] color[=] context dereference dereference-command-line " +
      "dereference-command-line-symlink-to-dir directory dired escape file-type format= full-time " +
      "group-directories-first help hide-control-chars hide= human-readable hyperlink[=] ignore-backups " +
      "ignore= indicator-style= inode kibibytes literal no-group numeric-uid-gid quote-name quoting-style= " +
      "recursive reverse show-control-chars si size sort= tabsize= time= time-style= version width= zero",
    others: "",
  },
  cat: {
    short: "AbeEnstTuv",
    readOnly:
      "help number number-nonblank show-all show-ends show-nonprinting show-tabs squeeze-blank version",
    others: "",
  },
  head: {
    // Digits: `-5` is `-n 5`.
    short: "c:n:qvz0123456789",
    readOnly: "bytes= help lines= quiet silent verbose version zero-terminated",
    others: "",
  },
  tail: {
    short: "c:fFn:qs:vz0123456789",
    readOnly:
      "bytes= follow[=] help lines= max-unchanged-stats= pid= quiet retry silent sleep-interval= verbose " +
      "version zero-terminated",
    others: "",
  },
  grep: GREP,
  egrep: GREP,
  fgrep: GREP,
  wc: {
    short: "cmlLw",
    readOnly: "bytes chars files0-from= help lines max-line-length version words",
    others: "",
  },
  stat: {
    short: "Lfc:t",
    readOnly: "cached= dereference file-system format= help printf= terse version",
    others: "",
  },
  // -C compiles a magic file (writes magic.mgc); -p writes the files' access times back; -S turns
  // off file's own seccomp sandbox; -z/-Z run decompressors over the files.
  file: {
    short: "vm:bce:f:F:ikl0LhnNP:rsd",
    readOnly:
      "apple brief checking-printout debug dereference exclude= exclude-quiet= extension files-from= help " +
      "keep-going list magic-file= mime mime-encoding mime-type no-buffer no-dereference no-pad parameter= " +
      "print0 raw separator= special-files version",
    others: "compile no-sandbox preserve-date uncompress uncompress-noreport",
  },
  du: {
    short: "0aB:bcDd:HhkLlmPSst:X:x",
    readOnly:
      "all apparent-size block-size= bytes count-links dereference dereference-args exclude-from= exclude= " +
      "files0-from= help human-readable inodes max-depth= no-dereference null one-file-system " +
      "separate-dirs si summarize threshold= time[=] time-style= total version",
    others: "",
  },
  df: {
    short: "aB:hHiklPt:Tx:v",
    readOnly:
      "all block-size= exclude-type= help human-readable inodes local no-sync output[=] portability " +
      "print-type si sync total type= version",
    others: "",
  },
  whoami: { short: "", readOnly: "help version", others: "" },
  uname: {
    short: "asnrvmpio",
    readOnly:
      "all hardware-platform help kernel-name kernel-release kernel-version machine nodename " +
      "operating-system processor version",
    others: "",
  },
  // Debian's which (a script): -a all matches, -s silent.
  which: { short: "as", readOnly: "", others: "" },
  // A second operand is the output file.
  uniq: {
    short: "cdDf:is:uzw:",
    readOnly:
      "all-repeated[=] check-chars= count group[=] help ignore-case repeated skip-chars= skip-fields= " +
      "unique version zero-terminated",
    others: "",
    operandsWrite: (operands) => operands.length >= 2,
  },
  cut: {
    short: "b:c:d:f:nszM",
    readOnly:
      "bytes= characters= complement delimiter= fields= help only-delimited output-delimiter= version " +
      "zero-terminated",
    others: "",
  },
  // -l/--paginate pipes the output through pr.
  diff: {
    short: "qscC:uU:enyW:pF:tTrNx:X:S:iEZbwBI:aD:dvL:0123456789",
    readOnly:
      "brief changed-group-format= color[=] context[=] ed exclude-from= exclude= expand-tabs from-file= " +
      "help horizon-lines= ifdef= ignore-all-space ignore-blank-lines ignore-case ignore-file-name-case " +
      "ignore-matching-lines= ignore-space-change ignore-tab-expansion ignore-trailing-space initial-tab " +
      "label= left-column line-format= minimal new-file new-group-format= new-line-format= no-dereference " +
      "no-ignore-file-name-case normal old-group-format= old-line-format= palette= rcs recursive " +
      "report-identical-files show-c-function show-function-line= side-by-side speed-large-files " +
      "starting-file= strip-trailing-cr suppress-blank-empty suppress-common-lines tabsize= text to-file= " +
      "unchanged-group-format= unchanged-line-format= unidirectional-new-file unified[=] version width=",
    others: "paginate",
  },
  pwd: { short: "LP", readOnly: "", others: "" },
};

/** Programs whose arguments are only printed (shell builtins): any argument keeps them read-only. */
export const PRINTS_ARGUMENTS: ReadonlySet<string> = new Set(["echo"]);

/**
 * find reads its expression, not getopt options, and takes no abbreviations:
 * the primaries that keep it read-only, with how many words follow each.
 * Left off: -exec, -execdir, -ok, -okdir (run programs), -delete, -fprint,
 * -fprint0, -fprintf, -fls (write files).
 */
export const FIND_READ_ONLY: ReadonlyMap<string, number> = new Map([
  ...split(
    "-H -L -P -daystart -depth -ignore_readdir_race -mount -noignore_readdir_race -noleaf -xdev -follow " +
      "-nowarn -warn -empty -false -true -executable -readable -writable -nogroup -nouser -print -print0 " +
      "-ls -prune -quit -not -a -and -o -or ( ) ! ,",
  ).map((p) => [p, 0] as const),
  ...split(
    "-D -regextype -maxdepth -mindepth -amin -anewer -atime -cmin -cnewer -ctime -fstype -gid -group " +
      "-ilname -iname -inum -ipath -iregex -iwholename -links -lname -mmin -mtime -name -newer -path -perm " +
      "-regex -samefile -size -type -uid -used -user -wholename -xtype -context -printf -files0-from",
  ).map((p) => [p, 1] as const),
]);

function split(list: string): string[] {
  return list.split(" ");
}
