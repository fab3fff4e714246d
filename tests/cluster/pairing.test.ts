/**
 * Pairing across a cluster: a code given by one gateway is approved on another (by /pairing or
 * `palaver pairing approve`), the sender is let in on every instance and welcomed once.
 */
import { afterEach, describe, expect, it } from "vitest";
import type { InboundMessage, OutboundMessage } from "../../src/bus/types.js";
import { ConfigSchema } from "../../src/config/schema.js";
import { DOCUMENT_NAMES, PgDocuments } from "../../src/db/documents.js";
import { logger } from "../../src/log.js";
import { PairingGate } from "../../src/pairing/gate.js";
import { PAIRING_DOCUMENT, PairingStore } from "../../src/pairing/store.js";
import { postgresMissing, usePostgres } from "../helpers/postgres.js";
import { requireOrSkip } from "../helpers/requires.js";
import { waitFor } from "../helpers/wait.js";

const log = logger("test");
const missing = requireOrSkip(postgresMissing());

const config = ConfigSchema.parse({
  channels: { telegram: { enabled: true, token: "1:x", allowFrom: ["42"], dmPolicy: "pairing" } },
});

function dm(senderId: string, content = "hi"): InboundMessage {
  return { channel: "telegram", senderId, chatId: senderId, content, isGroup: false };
}

interface Instance {
  store: PairingStore;
  gate: PairingGate;
  published: OutboundMessage[];
}

describe.skipIf(missing)("pairing across a cluster (real PostgreSQL)", () => {
  const { open, migratedDatabase, notifier } = usePostgres();
  const hubs: PgDocuments[] = [];
  const gates: PairingGate[] = [];

  afterEach(() => {
    for (const g of gates.splice(0)) g.stop();
    for (const hub of hubs.splice(0)) hub.stop();
  });

  /** One gateway (or CLI command): its own pool, notifier and documents; NOTIFY carries the changes. */
  async function instance(url: string): Promise<Instance> {
    const hub = new PgDocuments({ db: open(url), log, refreshMs: 600_000 });
    hubs.push(hub);
    const store = new PairingStore(hub.document(DOCUMENT_NAMES.pairing, PAIRING_DOCUMENT), { log });
    await hub.start(notifier(url, `pairing${hubs.length}`));
    const published: OutboundMessage[] = [];
    const gate = new PairingGate({
      store,
      config: () => config,
      publish: (msg) => published.push(msg),
      pollIntervalMs: 20,
      log,
    });
    gates.push(gate);
    return { store, gate, published };
  }

  async function cluster(count: number): Promise<Instance[]> {
    const { url } = await migratedDatabase();
    return Promise.all(Array.from({ length: count }, () => instance(url)));
  }

  const codeIn = (notice: string | null | undefined) => /pairing code: (\w{8})/.exec(notice ?? "")?.[1];

  it("a code given on A, approved with /pairing on B: the sender is let in on A, welcomed once", async () => {
    const [a, b] = await cluster(2);
    await Promise.all([a!.gate.start(), b!.gate.start()]);
    expect(a!.gate.allows("telegram", dm("7"), ["42"])).toBe(false);
    const code = codeIn(await a!.gate.refusal("telegram", dm("7")));
    expect(code).toBeDefined();
    await waitFor(() => b!.store.pending().length === 1, undefined, "b sees the code");
    expect(await b!.gate.command(dm("42"), `approve ${code}`)).toMatch(/^Approved: telegram user 7/);
    await waitFor(() => a!.gate.allows("telegram", dm("7"), ["42"]), undefined, "a lets the sender in");
    // Both gateways poll for approvals: the sender is welcomed by one of them, once.
    await waitFor(
      () => [a, b].every((x) => x!.store.approved()[0]?.welcomed === true && !x!.store.changed()),
      undefined,
      "both saw the welcome recorded",
    );
    const welcomes = [...a!.published, ...b!.published];
    expect(welcomes.map((m) => [m.chatId, m.content])).toEqual([
      ["7", "You're in: my owner approved you. Send me a message and I'll answer."],
    ]);
    // Used up everywhere.
    expect(await a!.gate.command(dm("42"), `approve ${code}`)).toMatch(/^No open pairing code/);
  });

  it("`palaver pairing approve` on another host: every gateway sees it, one welcomes; a revoke shuts them out", async () => {
    const [a, b, cli] = await cluster(3);
    await Promise.all([a!.gate.start(), b!.gate.start()]);
    const code = codeIn(await a!.gate.refusal("telegram", dm("8")));
    await waitFor(() => cli!.store.pending().length === 1, undefined, "the CLI sees the code");
    expect(await cli!.store.approve(code!, "cli")).toMatchObject({ ok: true });
    await waitFor(() => a!.published.length + b!.published.length === 1, undefined, "the sender welcomed");
    await waitFor(
      () => [a, b].every((x) => x!.gate.allows("telegram", dm("8"), ["42"]) && !x!.store.changed()),
      undefined,
      "both let the sender in and saw the last change",
    );
    expect(a!.published.length + b!.published.length).toBe(1);
    expect(await cli!.store.revoke("telegram", "8")).toBe(true);
    await waitFor(
      () => [a, b].every((x) => !x!.gate.allows("telegram", dm("8"), ["42"])),
      undefined,
      "shut out everywhere",
    );
  });

  it("strangers writing to two gateways at once all get codes, none lost", async () => {
    const [a, b] = await cluster(2);
    const notices = await Promise.all(
      Array.from({ length: 8 }, (_, i) => (i % 2 ? b! : a!).gate.refusal("telegram", dm(`s${i}`))),
    );
    const codes = notices.map(codeIn);
    await waitFor(() => a!.store.pending().length === 8, undefined, "a sees every code");
    expect(new Set(a!.store.pending().map((p) => p.code))).toEqual(new Set(codes));
  });
});
