/** A journal file layer that fails like a full disk while `full.on`, for write-failure tests. */
import { nodeJournalIo, type JournalIo } from "../../src/daemon/journal.js";

function enospc(): Error {
  return Object.assign(new Error("ENOSPC: no space left on device, write"), { code: "ENOSPC" });
}

/** The real file operations, failing like a full disk while `full.on`. */
export function diskThatFills(): { io: JournalIo; full: { on: boolean } } {
  const full = { on: false };
  const io: JournalIo = {
    ...nodeJournalIo,
    write: (fd, text) => {
      if (full.on) throw enospc();
      nodeJournalIo.write(fd, text);
    },
    replace: (path, text) => {
      if (full.on) throw enospc();
      nodeJournalIo.replace(path, text);
    },
  };
  return { io, full };
}
