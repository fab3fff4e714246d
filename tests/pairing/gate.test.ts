/** The pairing gate's decisions under each dmPolicy, with a real store in a temp folder. */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { InboundMessage, OutboundMessage } from "../../src/bus/types.js";
import { platformProblems } from "../../src/channels/registry.js";
import { ConfigSchema, type Config } from "../../src/config/schema.js";
import { PairingGate } from "../../src/pairing/gate.js";
import { MAX_PENDING_PER_CHANNEL, pairingPath, PairingStore } from "../../src/pairing/store.js";
import { captureLog } from "../helpers/log.js";

let dir: string;
let store: PairingStore;
let config: Config;
let published: OutboundMessage[];
let now: number;

function configWith(dmPolicy: string, allowFrom: string[] = ["42"]): Config {
  return ConfigSchema.parse({ channels: { telegram: { enabled: true, token: "1:x", allowFrom, dmPolicy } } });
}

function gate(): PairingGate {
  return new PairingGate({
    store,
    config: () => config,
    publish: (msg) => published.push(msg),
    now: () => now,
    log: captureLog().log,
  });
}

function dm(senderId: string, content = "hi"): InboundMessage {
  return { channel: "telegram", senderId, chatId: senderId, content, isGroup: false };
}

function inGroup(senderId: string): InboundMessage {
  return { channel: "telegram", senderId, chatId: "-100", content: "hi", isGroup: true };
}

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), "palaver-pairing-gate-"));
  now = Date.now();
  store = new PairingStore(pairingPath(dir), { now: () => now, log: captureLog().log });
  config = configWith("pairing");
  published = [];
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe("PairingGate", () => {
  it('"pairing": a stranger in a direct chat gets a code, and once approved is let in there only', async () => {
    const g = gate();
    expect(g.allows("telegram", dm("7"), ["42"])).toBe(false);
    const notice = await g.refusal("telegram", dm("7"));
    const code = /pairing code: (\w{8})/.exec(notice ?? "")?.[1];
    expect(code).toBeDefined();
    expect((await store.approve(code!, "cli")).ok).toBe(true);
    expect(g.allows("telegram", dm("7"), ["42"])).toBe(true);
    expect(g.allows("telegram", inGroup("7"), ["42"])).toBe(false);
    expect(g.allowsSender("telegram", "7")).toBe(true);
    expect(g.approvedIds("telegram")).toEqual(["7"]);
  });

  it("never gives a code where the platform does not say it is a direct chat", async () => {
    const g = gate();
    expect(await g.refusal("telegram", inGroup("7"))).toBeUndefined();
    expect(await g.refusal("telegram", { ...dm("7"), isGroup: undefined })).toBeUndefined();
    expect(store.pending()).toEqual([]);
  });

  it('"allowlist": allowFrom only, the usual refusal, and earlier approvals do not count', async () => {
    await store.approve((await store.request("telegram", "7", "7")).code, "cli");
    config = configWith("allowlist");
    const g = gate();
    expect(g.allows("telegram", dm("42"), ["42"])).toBe(true);
    expect(g.allows("telegram", dm("7"), ["42"])).toBe(false);
    expect(await g.refusal("telegram", dm("8"))).toBeUndefined();
    expect(g.approvedIds("telegram")).toEqual([]);
    expect(g.allowsSender("telegram", "7")).toBe(false);
  });

  it('"disabled": no direct messages at all, and no reply; groups are not affected', async () => {
    config = configWith("disabled");
    const g = gate();
    expect(g.allows("telegram", dm("42"), ["42"])).toBe(false);
    expect(await g.refusal("telegram", dm("7"))).toBeNull();
    expect(g.allows("telegram", inGroup("42"), ["42"])).toBe(true);
  });

  it('"open" needs allowFrom ["*"]: a config problem otherwise', async () => {
    expect(platformProblems(configWith("open", ["42"]))).toContainEqual(
      expect.stringMatching(/^channels\.telegram\.dmPolicy: "open" .*\.allowFrom to be \["\*"\]/),
    );
    expect(platformProblems(configWith("open", ["*"]))).toEqual([]);
    config = configWith("open", ["*"]);
    expect(gate().allows("telegram", dm("7"), ["*"])).toBe(true);
  });

  it("strangers cannot hold every slot: a newcomer to a full platform gets a code, the oldest is dropped", async () => {
    const g = gate();
    for (let i = 0; i < MAX_PENDING_PER_CHANNEL; i++) {
      await g.refusal("telegram", dm(`s${i}`));
      now += 1000;
    }
    const notice = await g.refusal("telegram", dm("newcomer"));
    const code = /pairing code: (\w{8})/.exec(notice ?? "")?.[1];
    expect(code).toBeDefined();
    expect(store.pending().map((p) => p.senderId)).not.toContain("s0");
    expect((await store.approve(code!, "cli")).ok).toBe(true);
    expect(g.allows("telegram", dm("newcomer"), ["42"])).toBe(true);
  });

  it("welcomes each approved person once; approvals older than a day are not greeted out of the blue", async () => {
    const old = await store.request("telegram", "5", "5");
    await store.approve(old.code, "cli");
    now += 2 * 24 * 60 * 60 * 1000;
    const fresh = await store.request("telegram", "6", "6");
    await store.approve(fresh.code, "cli");
    const g = gate();
    await g.start();
    g.stop();
    expect(published).toEqual([expect.objectContaining({ channel: "telegram", chatId: "6" })]);
    expect(store.approved().every((a) => a.welcomed)).toBe(true);
    await g.start();
    g.stop();
    expect(published).toHaveLength(1);
  });

  it('/pairing: only an owner (allowFrom or admins, not "*") may approve', async () => {
    config = ConfigSchema.parse({
      channels: { telegram: { enabled: true, token: "1:x", allowFrom: ["42", "*"], admins: ["9"] } },
    });
    const g = gate();
    const { code } = await store.request("telegram", "7", "7");
    expect(await g.command(dm("8", `/pairing approve ${code}`), `approve ${code}`)).toMatch(
      /^Only the owner/,
    );
    expect(await g.command(dm("9"), "list")).toContain(code);
    expect(await g.command(dm("42"), "approve")).toMatch(/^Usage/);
    expect(await g.command(dm("42"), `approve ${code}`)).toMatch(/^Approved: telegram user 7/);
    expect(published.map((m) => m.chatId)).toEqual(["7"]);
    expect(published[0]!.content).toMatch(/^You're in/);
  });
});
