/**
 * `palaver pairing list|approve|revoke` run as real child processes, with HOME and PALAVER_CONFIG
 * in a temp folder and no gateway; the "gateway" is a PairingStore in this test process on the same
 * file (the contract suite, tests/channels/contract/pairing.test.ts, approves with a running one).
 */
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { formatPairing } from "../../src/cli/pairing.js";
import { stateDir } from "../../src/config/paths.js";
import { CODE_TTL_MS, pairingPath, PairingStore } from "../../src/pairing/store.js";
import { runCli, type CliResult } from "../helpers/cli.js";
import { captureLog } from "../helpers/log.js";

let dir: string;
let configPath: string;

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), "palaver-pairing-cli-"));
  await mkdir(join(dir, "home"));
  configPath = join(dir, "conf", "config.json");
  await mkdir(dirname(configPath));
  await writeFile(configPath, JSON.stringify({ agents: { defaults: { workspace: join(dir, "ws") } } }));
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

function gatewayStore(): PairingStore {
  return new PairingStore(pairingPath(stateDir(configPath)), { log: captureLog().log });
}

async function codeFor(store: PairingStore, channel: string, id: string): Promise<string> {
  return (await store.request(channel, id, id)).code;
}

describe("palaver pairing", { timeout: 180_000 }, () => {
  it("lists waiting codes and approved people; approves a code; refuses a wrong one", async () => {
    const empty = await cli(["pairing", "list"]);
    expect(empty).toMatchObject({ code: 0, stderr: "" });
    expect(empty.stdout).toContain("No pairing codes are waiting.");

    const gateway = gatewayStore();
    const code = await codeFor(gateway, "telegram", "7");
    const listed = await cli(["pairing", "list"]);
    expect(listed.stdout).toMatch(new RegExp(`^${code}\\s+telegram\\s+7\\s+\\d+ min$`, "m"));

    const wrong = await cli(["pairing", "approve", "ZZZZZZZZ"]);
    expect(wrong.code).toBe(1);
    expect(wrong.stderr).toMatch(/^palaver: no open pairing code ZZZZZZZZ/);

    const approved = await cli(["pairing", "approve", code]);
    expect(approved).toMatchObject({ code: 0, stderr: "" });
    expect(approved.stdout).toContain("Approved telegram user 7");
    expect(gateway.isApproved("telegram", "7")).toBe(true);

    const json = JSON.parse((await cli(["pairing", "list", "--json"])).stdout) as {
      pending: unknown[];
      approved: { senderId: string; approvedBy: string }[];
    };
    expect(json.pending).toEqual([]);
    expect(json.approved).toMatchObject([{ senderId: "7", approvedBy: "cli" }]);
  });

  it("revokes an approved person; someone never approved is an error", async () => {
    const gateway = gatewayStore();
    await gateway.approve(await codeFor(gateway, "slack", "U2"), "cli");
    const revoked = await cli(["pairing", "revoke", "slack", "U2"]);
    expect(revoked).toMatchObject({ code: 0, stderr: "" });
    expect(revoked.stdout).toContain("Revoked slack user U2");
    expect(gateway.isApproved("slack", "U2")).toBe(false);
    const again = await cli(["pairing", "revoke", "slack", "U2"]);
    expect(again.code).toBe(1);
    expect(again.stderr).toContain("slack user U2 was not approved by pairing");
  });
});

describe("formatPairing", () => {
  it("shows minutes left and who approved whom", () => {
    const now = Date.UTC(2026, 0, 1, 12);
    const text = formatPairing(
      [
        {
          code: "K7M2QX9B",
          channel: "discord",
          senderId: "100",
          chatId: "200",
          createdAt: now - CODE_TTL_MS / 2,
        },
      ],
      [
        {
          channel: "telegram",
          senderId: "7",
          chatId: "7",
          approvedAt: now,
          approvedBy: "telegram:42",
          welcomed: true,
        },
      ],
      now,
      "UTC",
    );
    expect(text.split("\n")).toEqual([
      "CODE      PLATFORM  USER  EXPIRES IN",
      "K7M2QX9B  discord   100   30 min",
      "",
      "PLATFORM  USER  APPROVED                BY",
      "telegram  7     2026-01-01 12:00 (UTC)  telegram:42",
    ]);
  });
});
