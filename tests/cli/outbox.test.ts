/**
 * `palaver outbox list|drop` and the held-reply counts of `palaver status`, run as real child
 * processes (the build, dist/main.js) against a message journal holding undelivered replies.
 */
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { stateDir } from "../../src/config/paths.js";
import { Journal } from "../../src/daemon/journal.js";
import { messageJournalPath, readOutbox } from "../../src/daemon/outbox-file.js";
import { runCli, type CliResult } from "../helpers/cli.js";

let dir: string;
let configPath: string;
let journalPath: string;

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), "palaver-outbox-cli-"));
  configPath = join(dir, "conf", "config.json");
  await mkdir(join(dir, "conf"));
  await writeFile(configPath, JSON.stringify({ agents: { defaults: { workspace: join(dir, "ws") } } }));
  journalPath = messageJournalPath(stateDir(configPath));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

function cli(args: string[]): Promise<CliResult> {
  return runCli(args, {
    cwd: dir,
    env: { HOME: join(dir, "home"), PALAVER_CONFIG: configPath, PALAVER_LOG_LEVEL: "silent" },
  });
}

/** What a gateway leaves when reminders fire for platforms that are not enabled (one reply sent). */
function journalWithHeldReplies(): string[] {
  const journal = new Journal(journalPath);
  journal.open();
  const ids = [
    journal.recordOutbound({ channel: "telegram", chatId: "123456", content: "Time to stretch!\nStand up." }),
    journal.recordOutbound({ channel: "telegram", chatId: "123456", content: "Weekly review" }),
    journal.recordOutbound({ channel: "slack", chatId: "C1", content: "Stand-up in 5 minutes" }),
  ];
  journal.markSent(journal.recordOutbound({ channel: "slack", chatId: "C1", content: "delivered" }));
  journal.close();
  return ids;
}

describe("palaver outbox", { timeout: 120_000 }, () => {
  it("lists the undelivered replies and drops them by id, by channel and all", async () => {
    const [stretch, review, standup] = journalWithHeldReplies();

    const list = await cli(["outbox", "list"]);
    expect(list).toMatchObject({ code: 0, stderr: "" });
    const lines = list.stdout.split("\n");
    expect(lines[0]).toMatch(/^ID\s+CHANNEL\s+CHAT\s+AGE\s+TEXT$/);
    expect(lines[1]).toMatch(
      new RegExp(`^${stretch!.slice(0, 8)}\\s+telegram\\s+123456\\s+\\d+s\\s+Time to stretch! Stand up\\.$`),
    );
    expect(lines[3]).toMatch(
      new RegExp(`^${standup!.slice(0, 8)}\\s+slack\\s+C1\\s+\\d+s\\s+Stand-up in 5 minutes$`),
    );
    expect(list.stdout).not.toContain("delivered");

    const status = await cli(["status"]);
    expect(status.stdout).toContain("held       telegram 2, slack 1 undelivered (palaver outbox list)");

    const byId = await cli(["outbox", "drop", stretch!.slice(0, 8)]);
    expect(byId).toMatchObject({ code: 0, stdout: `Dropped 1 reply: ${stretch!.slice(0, 8)}\n` });
    expect(readOutbox(journalPath).map((e) => e.id)).toEqual([review, standup]);

    const byChannel = await cli(["outbox", "drop", "--channel", "slack"]);
    expect(byChannel.stdout).toBe(`Dropped 1 reply: ${standup!.slice(0, 8)}\n`);
    const all = await cli(["outbox", "drop", "--all"]);
    expect(all.stdout).toBe(`Dropped 1 reply: ${review!.slice(0, 8)}\n`);

    expect(readOutbox(journalPath)).toEqual([]);
    const empty = await cli(["outbox", "list"]);
    expect(empty.stdout).toBe("No replies waiting: everything was delivered.\n");
    const after = await cli(["status"]);
    expect(after.stdout).toContain("held       no undelivered replies");
  });

  it("says how to choose, and names an id it does not know", async () => {
    journalWithHeldReplies();
    const none = await cli(["outbox", "drop"]);
    expect(none).toMatchObject({
      code: 1,
      stderr: "palaver: say which replies to drop: their ids, or --channel NAME, or --all (one of them)\n",
    });
    const unknown = await cli(["outbox", "drop", "ffffffff"]);
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toContain("no waiting reply with id ffffffff");
    expect(readOutbox(journalPath)).toHaveLength(3);
  });
});
