import { mkdtemp, readdir, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { CODE_TTL_MS, MAX_PENDING_PER_CHANNEL, pairingPath, PairingStore } from "../../src/pairing/store.js";
import { captureLog } from "../helpers/log.js";

let dir: string;
let path: string;
let now: number;

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), "palaver-pairing-"));
  path = pairingPath(dir);
  now = 1_800_000_000_000;
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

function store(log = captureLog().log): PairingStore {
  return new PairingStore(path, { now: () => now, log });
}

async function codeOf(request: ReturnType<PairingStore["request"]>): Promise<string> {
  return (await request).code;
}

describe("PairingStore", () => {
  it("gives a stranger one code, the same again while it is open, in a 0600 file", async () => {
    const s = store();
    const first = await s.request("telegram", "7", "7");
    expect(first.code).toMatch(/^[A-Z2-9]{8}$/);
    expect(first).toMatchObject({ expiresAt: now + CODE_TTL_MS });
    expect(await s.request("telegram", "7", "7")).toEqual(first);
    expect(s.pending()).toHaveLength(1);
    expect((await stat(path)).mode & 0o777).toBe(0o600);
    expect((await stat(join(dir, "pairing"))).mode & 0o777).toBe(0o700);
  });

  it("keeps at most MAX_PENDING_PER_CHANNEL open codes per platform, a newcomer's pushing out the oldest", async () => {
    const s = store();
    // Three strangers used to hold every slot for an hour; now a newcomer always gets a code.
    for (let i = 0; i < MAX_PENDING_PER_CHANNEL; i++) {
      await codeOf(s.request("telegram", `u${i}`, `u${i}`));
      now += 1000;
    }
    const newcomer = await s.request("telegram", "new", "new");
    expect(newcomer.code).toMatch(/^[A-Z2-9]{8}$/);
    expect(newcomer.dropped).toMatchObject({ channel: "telegram", senderId: "u0" });
    const waiting = s.pending().map((p) => p.senderId);
    expect(waiting).toHaveLength(MAX_PENDING_PER_CHANNEL);
    expect(waiting).not.toContain("u0");
    expect(waiting.at(-1)).toBe("new");
    // Asking again re-sends the same code and pushes nobody out: one code per sender.
    expect(await s.request("telegram", "u5", "u5")).not.toHaveProperty("dropped");
    expect(await s.request("telegram", "new", "new")).toEqual({
      code: newcomer.code,
      expiresAt: newcomer.expiresAt,
    });
    expect(s.pending()).toHaveLength(MAX_PENDING_PER_CHANNEL);
    // Other platforms have their own room.
    expect(await s.request("slack", "U9", "D9")).not.toHaveProperty("dropped");
    // Expired codes make room without pushing anyone out.
    now += CODE_TTL_MS;
    expect(await s.request("telegram", "u9", "u9")).not.toHaveProperty("dropped");
    expect(s.pending().map((p) => p.senderId)).toEqual(["u9"]);
  });

  it("approves an open code once: its sender is let in, to be welcomed in their chat", async () => {
    const s = store();
    const code = await codeOf(s.request("slack", "U2", "D2"));
    const result = await s.approve(code.toLowerCase(), "cli");
    expect(result).toEqual({
      ok: true,
      approved: {
        channel: "slack",
        senderId: "U2",
        chatId: "D2",
        approvedAt: now,
        approvedBy: "cli",
        welcomed: false,
      },
    });
    expect(s.isApproved("slack", "U2")).toBe(true);
    expect(s.isApproved("telegram", "U2")).toBe(false);
    expect(s.pending()).toEqual([]);
    // Reused: the code is gone.
    expect(await s.approve(code, "cli")).toEqual({ ok: false, reason: "unknown" });
  });

  it("refuses wrong, malformed and expired codes", async () => {
    const s = store();
    const code = await codeOf(s.request("telegram", "7", "7"));
    expect(await s.approve("ZZZZZZZZ", "cli")).toEqual({ ok: false, reason: "unknown" });
    expect(await s.approve("hello", "cli")).toEqual({ ok: false, reason: "malformed" });
    now += CODE_TTL_MS;
    expect(await s.approve(code, "cli")).toEqual({ ok: false, reason: "unknown" });
    expect(s.isApproved("telegram", "7")).toBe(false);
  });

  it("revokes an approved sender; revoking someone not approved says so", async () => {
    const s = store();
    await s.approve(await codeOf(s.request("telegram", "7", "7")), "cli");
    expect(await s.revoke("telegram", "7")).toBe(true);
    expect(s.isApproved("telegram", "7")).toBe(false);
    expect(await s.revoke("telegram", "7")).toBe(false);
  });

  it("drops a sender's open code (they left the chat), and only theirs; none to drop says so", async () => {
    const s = store();
    await s.request("telegram", "7", "7");
    const other = await codeOf(s.request("telegram", "8", "8"));
    const elsewhere = await codeOf(s.request("slack", "7", "D7"));
    expect(await s.dropPending("telegram", "7")).toBe(true);
    expect(s.pending().map((p) => p.code)).toEqual([other, elsewhere]);
    expect(await s.dropPending("telegram", "7")).toBe(false);
    // Approved people are not touched: only the owner revokes.
    await s.approve(other, "cli");
    expect(await s.dropPending("telegram", "8")).toBe(false);
    expect(s.isApproved("telegram", "8")).toBe(true);
  });

  it("sees what another process wrote at its next read (the CLI and a running gateway)", async () => {
    const gateway = store();
    const cli = store();
    const code = await codeOf(gateway.request("discord", "100", "200"));
    expect(gateway.changed()).toBe(false);
    expect((await cli.approve(code, "cli")).ok).toBe(true);
    expect(gateway.changed()).toBe(true);
    expect(gateway.isApproved("discord", "100")).toBe(true);
    expect(gateway.changed()).toBe(false);
    await gateway.markWelcomed([{ channel: "discord", senderId: "100" }]);
    expect(cli.approved()).toEqual([expect.objectContaining({ senderId: "100", welcomed: true })]);
    await cli.revoke("discord", "100");
    expect(gateway.isApproved("discord", "100")).toBe(false);
  });

  it("moves a corrupt file aside with a warning and starts empty", async () => {
    const s = store();
    await s.approve(await codeOf(s.request("telegram", "7", "7")), "cli");
    await writeFile(path, "{ not json");
    const { log, lines } = captureLog();
    const fresh = store(log);
    expect(fresh.approved()).toEqual([]);
    expect(lines.some((l) => String(l.msg).includes("the pairing file is not valid"))).toBe(true);
    expect((await readdir(join(dir, "pairing"))).some((f) => f.startsWith("pairing.json.corrupt-"))).toBe(
      true,
    );
    await codeOf(fresh.request("telegram", "8", "8"));
    expect(fresh.pending()).toHaveLength(1);
  });
});
