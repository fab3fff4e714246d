/**
 * A state file that cannot be written (disk full, read-only, no permission), in the words an
 * operator acts on: which file, what is wrong (with the code to search for) and what to do.
 * Shared by every writer of the state folder and the workspace, so a full disk reads the same
 * whichever file met it first.
 */
import { PalaverError, errorMessage } from "./errors.js";

const WRITE_ERRORS: Record<string, { what: string; fix: string }> = {
  ENOSPC: { what: "disk full (ENOSPC)", fix: "free space on the disk that holds it" },
  EDQUOT: { what: "disk quota exceeded (EDQUOT)", fix: "free space or raise the quota" },
  EROFS: { what: "file system is read-only (EROFS)", fix: "remount it read-write" },
  EACCES: { what: "no permission to write (EACCES)", fix: "let the user palaver runs as write there" },
  EPERM: { what: "no permission to write (EPERM)", fix: "let the user palaver runs as write there" },
  EIO: { what: "I/O error (EIO)", fix: "check the disk" },
};

/** An error of the file system that writeFailure has words for (a full disk, say). */
export function isFileSystemError(err: unknown): boolean {
  const code = (err as NodeJS.ErrnoException | null)?.code;
  return code !== undefined && code in WRITE_ERRORS;
}

/** "disk full (ENOSPC)", or the error's own message for a code without plain words. */
export function describeWriteError(err: unknown): string {
  const code = (err as NodeJS.ErrnoException | null)?.code;
  return (code && WRITE_ERRORS[code]?.what) ?? errorMessage(err);
}

/** "cannot write <what> <path>: disk full (ENOSPC); free space on the disk that holds it". */
export function writeFailure(what: string, path: string, err: unknown): PalaverError {
  const code = (err as NodeJS.ErrnoException | null)?.code;
  const fix = code ? WRITE_ERRORS[code]?.fix : undefined;
  return new PalaverError(
    `cannot write ${what} ${path}: ${describeWriteError(err)}${fix ? `; ${fix}` : ""}`,
    {
      cause: err,
    },
  );
}
