/**
 * Other people's conversations are out of reach of the tools: the sessions
 * folder and other chats' media folders refused to read_file, write_file,
 * edit_file, list_dir, the message tool's attachments and exec (in the real
 * bubblewrap sandbox, skipped with the reason where it cannot run, and
 * without it); the turn's own attachments stay usable.
 */
import { mkdir, readFile, symlink, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { createExecTool, type ExecToolOptions } from "../../../src/agent/tools/exec/exec.js";
import { ExecSandbox } from "../../../src/agent/tools/exec/sandbox.js";
import { createFilesystemTools } from "../../../src/agent/tools/filesystem.js";
import { createMessageTool } from "../../../src/agent/tools/message.js";
import type { Tool } from "../../../src/agent/tools/types.js";
import { requireOrSkip } from "../../helpers/requires.js";
import { TempDirs, makeContext } from "./helpers.js";

const OTHER_SESSION = "alice told bob a secret 4711";
const OWN_SESSION = "this chat's own history 0815";
const OTHER_MEDIA = "another chat's attachment 2342";
const FLAT_MEDIA = "an attachment of the old flat layout 1337";
const OWN_MEDIA = "my own attachment 9999";

const probe = await new ExecSandbox({ mode: "auto", network: false }).state();
const noSandbox = requireOrSkip(
  probe.sandboxed ? "" : `the sandboxed chat-privacy test needs bwrap: ${probe.reason}`,
);

const temps = new TempDirs();
let ws: string;

/** A workspace holding two chats' sessions and media (telegram:42 is the turn's own chat). */
beforeEach(async () => {
  ws = await temps.make("palaver-privacy-");
  await mkdir(join(ws, "sessions"));
  await writeFile(
    join(ws, "sessions", "telegram_43.jsonl"),
    `${JSON.stringify({ content: OTHER_SESSION })}\n`,
  );
  await writeFile(join(ws, "sessions", "telegram_42.jsonl"), `${JSON.stringify({ content: OWN_SESSION })}\n`);
  await mkdir(join(ws, "media", "telegram", "42"), { recursive: true });
  await mkdir(join(ws, "media", "telegram", "43"), { recursive: true });
  await mkdir(join(ws, "media", "web", "abc"), { recursive: true });
  await writeFile(join(ws, "media", "telegram", "42", "mine.txt"), OWN_MEDIA);
  await writeFile(join(ws, "media", "telegram", "43", "theirs.txt"), OTHER_MEDIA);
  await writeFile(join(ws, "media", "web", "abc", "upload.txt"), OTHER_MEDIA);
  await writeFile(join(ws, "media", "telegram", "20250101-0000abcd-old.txt"), FLAT_MEDIA);
  await writeFile(join(ws, "notes.md"), "my notes\n");
});
afterEach(() => temps.cleanup());

const turn = () =>
  makeContext({ workspace: ws, channel: "telegram", chatId: "42", sessionKey: "telegram:42" });

function fileTools(restrictToWorkspace = true): Record<string, Tool> {
  const tools = createFilesystemTools({ workspace: ws, restrictToWorkspace, readFileMaxChars: 10_000 });
  return Object.fromEntries(tools.map((t) => [t.name, t]));
}

/** The call's result, or its error message (as the registry would give it to the model). */
async function outcome(tool: Tool, args: Record<string, unknown>): Promise<string> {
  try {
    return await tool.execute(args, turn().ctx);
  } catch (err) {
    return `Error: ${(err as Error).message}`;
  }
}

describe("file tools", () => {
  it.each([true, false])(
    "refuse every session file, another chat's and the turn's own (restrictToWorkspace %s)",
    async (restrict) => {
      const t = fileTools(restrict);
      for (const path of ["sessions/telegram_43.jsonl", join(ws, "sessions", "telegram_42.jsonl")]) {
        const read = await outcome(t.read_file!, { path });
        expect(read).toMatch(/^Error: access denied: .* is in sessions\/, which holds the conversations/);
        expect(read).toContain("memory");
      }
      expect(await outcome(t.list_dir!, { path: "sessions" })).toMatch(/^Error: access denied/);
      expect(await outcome(t.write_file!, { path: "sessions/telegram_43.jsonl", content: "forged" })).toMatch(
        /^Error: access denied/,
      );
      expect(await outcome(t.write_file!, { path: "sessions/new.jsonl", content: "x" })).toMatch(
        /^Error: access denied/,
      );
      expect(
        await outcome(t.edit_file!, {
          path: "sessions/telegram_43.jsonl",
          old_text: "secret",
          new_text: "x",
        }),
      ).toMatch(/^Error: access denied/);
      expect(await readFile(join(ws, "sessions", "telegram_43.jsonl"), "utf8")).toContain(OTHER_SESSION);
    },
  );

  it("refuse another chat's media, the media folders above the turn's own and old flat files", async () => {
    const t = fileTools();
    for (const path of [
      "media/telegram/43/theirs.txt",
      "media/web/abc/upload.txt",
      "media/telegram/20250101-0000abcd-old.txt",
    ]) {
      const read = await outcome(t.read_file!, { path });
      expect(read).toMatch(/^Error: access denied: .* outside this chat's own folder media\/telegram\/42\//);
    }
    for (const path of ["media", "media/telegram", "media/telegram/43", "media/web"]) {
      expect(await outcome(t.list_dir!, { path })).toMatch(/^Error: access denied/);
    }
    expect(await outcome(t.write_file!, { path: "media/telegram/43/planted.txt", content: "x" })).toMatch(
      /^Error: access denied/,
    );
  });

  it("refuse a symlink in the workspace that leads into another chat's data", async () => {
    await symlink(join(ws, "sessions"), join(ws, "history-link"));
    await symlink(
      join(ws, "media", "telegram", "43", "theirs.txt"),
      join(ws, "media", "telegram", "42", "link"),
    );
    const t = fileTools();
    expect(await outcome(t.read_file!, { path: "history-link/telegram_43.jsonl" })).toMatch(
      /^Error: access denied/,
    );
    expect(await outcome(t.read_file!, { path: "media/telegram/42/link" })).toMatch(/^Error: access denied/);
  });

  it("keep the turn's own attachments and the rest of the workspace usable", async () => {
    const t = fileTools();
    expect(await outcome(t.read_file!, { path: "media/telegram/42/mine.txt" })).toBe(OWN_MEDIA);
    expect(await outcome(t.read_file!, { path: join(ws, "media", "telegram", "42", "mine.txt") })).toBe(
      OWN_MEDIA,
    );
    expect(await outcome(t.list_dir!, { path: "media/telegram/42" })).toBe("mine.txt");
    expect(await outcome(t.write_file!, { path: "media/telegram/42/out.txt", content: "made here" })).toMatch(
      /^Wrote/,
    );
    expect(await outcome(t.read_file!, { path: "notes.md" })).toBe("my notes\n");
    expect(await outcome(t.list_dir!, { path: "." })).toContain("sessions/");
  });
});

describe("message tool", () => {
  const send = (media: string[]) =>
    createMessageTool({ restrictToWorkspace: true })
      .execute({ content: "here", media }, turn().ctx)
      .catch((err: unknown) => `Error: ${(err as Error).message}`);

  it("cannot attach a session file or another chat's media", async () => {
    for (const path of ["sessions/telegram_43.jsonl", "sessions/telegram_42.jsonl"]) {
      expect(await send([path])).toMatch(/^Error: access denied: .* is in sessions\//);
    }
    for (const path of ["media/telegram/43/theirs.txt", "media/telegram/20250101-0000abcd-old.txt"]) {
      expect(await send([path])).toMatch(/^Error: access denied: .* outside this chat's own folder/);
    }
  });

  it("attaches the turn's own attachment", async () => {
    const { ctx, published } = turn();
    await createMessageTool({ restrictToWorkspace: true }).execute(
      { content: "back to you", media: ["media/telegram/42/mine.txt"] },
      ctx,
    );
    expect(published[0]!.media).toEqual([join(ws, "media", "telegram", "42", "mine.txt")]);
  });
});

describe("exec", () => {
  function exec(sandbox: ExecSandbox, over: Partial<ExecToolOptions> = {}): Tool {
    return createExecTool({
      workspace: ws,
      restrictToWorkspace: true,
      timeoutSeconds: 30,
      maxOutputChars: 100_000,
      pathAppend: "",
      denyPatterns: [],
      killGraceMs: 500,
      sandbox,
      configPath: join(ws, "..", "no-config.json"),
      ...over,
    });
  }
  const run = (tool: Tool, command: string, working_dir?: string) =>
    tool
      .execute({ command, ...(working_dir ? { working_dir } : {}) }, turn().ctx)
      .catch((err: unknown) => `Error: ${(err as Error).message}`);

  it.skipIf(noSandbox)(
    "in the sandbox sees no session and no other chat's media, and its own chat's media",
    async () => {
      const tool = exec(new ExecSandbox({ mode: "require", network: false }));
      const read = await run(
        tool,
        "cat sessions/telegram_43.jsonl sessions/telegram_42.jsonl media/telegram/43/theirs.txt " +
          "media/web/abc/upload.txt media/telegram/*-old.txt; cat media/telegram/42/mine.txt",
      );
      expect(read).toContain(OWN_MEDIA);
      for (const secret of [OTHER_SESSION, OWN_SESSION, OTHER_MEDIA, FLAT_MEDIA])
        expect(read).not.toContain(secret);
      // Listed, the sessions folder is empty and media holds only the chat's own folder.
      expect(await run(tool, "ls -A sessions; ls -R media; echo made > media/telegram/42/made.txt")).toBe(
        [
          "media:",
          "telegram",
          "",
          "media/telegram:",
          "42",
          "",
          "media/telegram/42:",
          "mine.txt",
          "",
          "Exit code: 0",
        ].join("\n"),
      );
      // What the command writes into its own chat's folder stays there.
      expect(await readFile(join(ws, "media", "telegram", "42", "made.txt"), "utf8")).toBe("made\n");
      expect(await run(tool, "ls", "media/telegram/43")).toMatch(/^Error: access denied/);
      expect(await run(tool, "cat mine.txt", "media/telegram/42")).toContain(OWN_MEDIA);
    },
  );

  it("without the sandbox refuses commands naming the sessions or another chat's media", async () => {
    const tool = exec(new ExecSandbox({ mode: "off", network: true }));
    for (const command of [
      "cat sessions/telegram_43.jsonl",
      `cat ${join(ws, "sessions", "telegram_42.jsonl")}`,
      "grep -r secret sessions",
      "cat sessions/*.jsonl",
      "ls media/telegram",
      "cat media/telegram/43/theirs.txt",
      "tar czf out.tgz media/*",
    ]) {
      expect(await run(tool, command), command).toMatch(/^Error: command refused \(access denied/);
    }
    expect(await run(tool, "ls", "sessions")).toMatch(/^Error: access denied/);
    expect(await run(tool, "cat media/telegram/42/mine.txt")).toContain(OWN_MEDIA);
    expect(await run(tool, "cat notes.md")).toContain("my notes");
  });
});
