/**
 * `palaver pairing` and `palaver approvals` in cluster mode, as real child processes (the build)
 * with `cluster.database` in their config: they change the cluster's documents, and a gateway's
 * store on another connection hears of it.
 */
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { CHAT_RULES_DOCUMENT, FileChatRules } from "../../src/approvals/chat-rules.js";
import { DOCUMENT_NAMES, PgDocuments } from "../../src/db/documents.js";
import { logger } from "../../src/log.js";
import { PAIRING_DOCUMENT, PairingStore } from "../../src/pairing/store.js";
import { runCli, type CliResult } from "../helpers/cli.js";
import { postgresMissing, usePostgres } from "../helpers/postgres.js";
import { requireOrSkip } from "../helpers/requires.js";
import { waitFor } from "../helpers/wait.js";

const log = logger("test");
const missing = requireOrSkip(postgresMissing());

describe.skipIf(missing)("palaver pairing / approvals in cluster mode", { timeout: 180_000 }, () => {
  const { open, createDatabase, migratedDatabase, notifier } = usePostgres();
  let dir: string;
  const hubs: PgDocuments[] = [];

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "palaver-cluster-cli-"));
  });
  afterEach(() => {
    for (const hub of hubs.splice(0)) hub.stop();
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  /** A config naming the cluster database `url`, in a folder of its own; the command runner for it. */
  async function cliFor(url: string): Promise<(args: string[]) => Promise<CliResult>> {
    const home = await mkdtemp(join(dir, "host-"));
    const configPath = join(home, "conf", "config.json");
    await mkdir(dirname(configPath), { recursive: true });
    await writeFile(
      configPath,
      JSON.stringify({ agents: { defaults: { workspace: join(home, "ws") } }, cluster: { database: url } }),
    );
    return (args) =>
      runCli(args, {
        cwd: home,
        env: { HOME: home, PALAVER_CONFIG: configPath, PALAVER_LOG_LEVEL: "silent" },
      });
  }

  /** A gateway's documents on its own pool (to start with a notifier of its own). */
  function gatewayDocuments(url: string): PgDocuments {
    const hub = new PgDocuments({ db: open(url, "palaver test gateway"), log, refreshMs: 600_000 });
    hubs.push(hub);
    return hub;
  }

  it("approves a code a gateway gave and revokes it; the gateway hears of both", async () => {
    const { url } = await migratedDatabase();
    const hub = gatewayDocuments(url);
    const gateway = new PairingStore(hub.document(DOCUMENT_NAMES.pairing, PAIRING_DOCUMENT), { log });
    await hub.start(notifier(url, "test gateway"));
    const { code } = await gateway.request("telegram", "7", "7");
    const cli = await cliFor(url);

    const listed = await cli(["pairing", "list"]);
    expect(listed).toMatchObject({ code: 0, stderr: "" });
    expect(listed.stdout).toMatch(new RegExp(`^${code}\\s+telegram\\s+7\\s+\\d+ min$`, "m"));
    const approved = await cli(["pairing", "approve", code]);
    expect(approved).toMatchObject({ code: 0, stderr: "" });
    expect(approved.stdout).toContain("Approved telegram user 7");
    await waitFor(() => gateway.isApproved("telegram", "7"), undefined, "the gateway lets them in");

    expect(await cli(["pairing", "revoke", "telegram", "7"])).toMatchObject({ code: 0, stderr: "" });
    await waitFor(() => !gateway.isApproved("telegram", "7"), undefined, "the gateway shuts them out");
  });

  it("lists and revokes the approval rules a gateway added", async () => {
    const { url } = await migratedDatabase();
    const hub = gatewayDocuments(url);
    const rules = new FileChatRules(hub.document(DOCUMENT_NAMES.approvalRules, CHAT_RULES_DOCUMENT), log);
    await hub.start(notifier(url, "test gateway"));
    const rule = await rules.add({
      channel: "telegram",
      chatId: "42",
      tool: "exec",
      program: "git",
      addedBy: "ann",
    });
    const cli = await cliFor(url);
    const json = await cli(["approvals", "list", "--json"]);
    expect(JSON.parse(json.stdout)).toEqual([rule]);
    expect(await cli(["approvals", "revoke", rule.id])).toMatchObject({ code: 0, stderr: "" });
    await waitFor(() => rules.list().length === 0, undefined, "the gateway's rule gone");
  });

  it("refuses a database without palaver's tables, saying what to do", async () => {
    const url = await createDatabase();
    const result = await (await cliFor(url))(["pairing", "list"]);
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(/has no palaver tables yet: start a gateway with this config first/);
  });
});
