/**
 * Pairing end to end on every platform: a Gateway (channel manager, agent, cron) with the real
 * adapter against the loopback fake of its API and the model behind FakeOpenAI. A stranger's
 * direct message gets a code; the owner approves it with `palaver pairing approve` (a real child
 * process on the same state folder) or `/pairing approve` in their own chat; revoking shuts the
 * person out again and stops their reminders. Groups never pair anyone.
 */
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { Gateway } from "../../../src/gateway.js";
import { CODE_TTL_MS, pairingPath, PairingStore } from "../../../src/pairing/store.js";
import { FakeOpenAI, lastUserText } from "../../fakes/openai-server.js";
import { runCli } from "../../helpers/cli.js";
import { captureLog } from "../../helpers/log.js";
import { waitFor } from "../../helpers/wait.js";
import type { PlatformRig } from "./driver.js";
import { DRIVERS } from "./drivers.js";
import { startRigGateway } from "./gateway.js";

const CODE = /pairing code: ([A-Z2-9]{8})/;

describe.each(DRIVERS)("pairing: $name", { timeout: 120_000 }, (driver) => {
  let dir: string;
  let configPath: string;
  let rig: PlatformRig;
  let llm: FakeOpenAI;
  let gateway: Gateway;

  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), `palaver-pairing-${driver.name}-`));
    configPath = join(dir, "config.json");
    rig = await driver.create({ workspace: join(dir, "downloads") });
    llm = await FakeOpenAI.start();
    llm.setHandler((req) => ({ content: `re: ${lastUserText(req)}` }));
    // The same file for `palaver pairing` in a child process (it finds the state folder beside it).
    await writeFile(configPath, JSON.stringify({ agents: { defaults: { workspace: join(dir, "ws") } } }));
    // dmPolicy is left out: "pairing" is the default.
    gateway = await startRigGateway({
      driver,
      rig,
      llm,
      workspace: join(dir, "ws"),
      configPath,
      channels: { streaming: false },
    });
  });

  afterEach(async () => {
    await gateway.stop(1000);
    await rig.close();
    await llm.close();
    await rm(dir, { recursive: true, force: true });
  });

  /** Another process's view of the pairing file (what `palaver pairing` reads and writes). */
  function outside(now?: () => number): PairingStore {
    return new PairingStore(pairingPath(dir), { log: captureLog().log, ...(now ? { now } : {}) });
  }

  /** What the model was asked, over all requests. */
  function askedOfModel(): string {
    return llm.requests.map((r) => JSON.stringify(r.body.messages)).join("\n");
  }

  /** The stranger writes; resolves with the code the bot answered with. */
  async function strangerGetsCode(text = "hi, can we talk?"): Promise<string> {
    await rig.userSends(rig.strangerSender, text);
    await waitFor(() => rig.texts().some((t) => CODE.test(t)), undefined, "the pairing code");
    return CODE.exec(rig.texts().find((t) => CODE.test(t))!)![1]!;
  }

  /** The owner writes `text` in their own chat; resolves with the bot's answer there. */
  async function ownerSays(text: string, answerIncludes: string): Promise<string> {
    await rig.userSends(rig.allowedSender, text);
    await waitFor(
      () => rig.texts().some((t) => t.includes(answerIncludes)),
      undefined,
      `the answer to ${text}`,
    );
    return rig.texts().find((t) => t.includes(answerIncludes))!;
  }

  /** The stranger, now let in, writes and is answered by the model. */
  async function strangerIsAnswered(text: string): Promise<void> {
    await rig.userSends(rig.strangerSender, text);
    await waitFor(() => rig.texts().includes(`re: ${text}`), undefined, "the model's answer to the newcomer");
  }

  async function welcomed(): Promise<void> {
    await waitFor(() => rig.texts().some((t) => t.startsWith("You're in")), undefined, "the welcome");
  }

  it("a stranger's direct message gets one reply with a code; nothing reaches the model or the journal", async () => {
    const code = await strangerGetsCode("my secret question");
    const notice = rig.texts().find((t) => t.includes(code))!;
    expect(notice).toContain(`palaver pairing approve ${code}`);
    expect(notice).toContain(`/pairing approve ${code}`);
    expect(notice).toMatch(/expires in an hour/);
    // A second message within the hour: no second reply (the refusal notice's limiter).
    await rig.userSends(rig.strangerSender, "hello??");
    // The owner's message after it is a barrier: once it is answered, the stranger's was handled.
    await ownerSays("ping", "re: ping");
    expect(rig.texts().filter((t) => t.includes("pairing code"))).toHaveLength(1);
    expect(askedOfModel()).not.toContain("my secret question");
    expect(askedOfModel()).not.toContain("hello??");
    const journal = await readFile(join(dir, "journal", "messages.jsonl"), "utf8");
    expect(journal).not.toContain("my secret question");
    expect(outside().pending()).toEqual([
      expect.objectContaining({ code, channel: driver.name, senderId: rig.strangerSender }),
    ]);
  });

  it("approved with `palaver pairing approve` while the gateway runs: welcomed, and the next message is answered", async () => {
    const code = await strangerGetsCode();
    const result = await runCli(["pairing", "approve", code.toLowerCase()], {
      cwd: dir,
      env: { HOME: join(dir, "home"), PALAVER_CONFIG: configPath, PALAVER_LOG_LEVEL: "silent" },
    });
    expect(result).toMatchObject({ code: 0, stderr: "" });
    expect(result.stdout).toContain(`Approved ${driver.name} user ${rig.strangerSender}`);
    await welcomed();
    await strangerIsAnswered("thanks, here I am");
    expect(rig.texts().filter((t) => t.startsWith("You're in"))).toHaveLength(1);
  });

  it("approved by the owner's `/pairing approve` in their own chat, without the model", async () => {
    const code = await strangerGetsCode();
    const answer = await ownerSays(`/pairing approve ${code}`, "Approved");
    expect(answer).toContain(`${driver.name} user ${rig.strangerSender} can talk to me now`);
    await welcomed();
    await strangerIsAnswered("hello, owner's friend here");
    expect(askedOfModel()).not.toContain("/pairing");
    // /status counts them.
    await ownerSays("/status", "Pairing:");
    expect(rig.texts().find((t) => t.includes("Pairing:"))).toContain(
      "Pairing: 1 approved person, 0 codes waiting",
    );
  });

  it("wrong, expired and reused codes are refused", async () => {
    const code = await strangerGetsCode();
    expect(await ownerSays("/pairing approve ZZZZZZZZ", "No open pairing code ZZZZZZZZ")).toMatch(
      /mistyped, expired/,
    );
    // A code given two hours ago, as another process would have written it.
    const old = await outside(() => Date.now() - 2 * CODE_TTL_MS).request(driver.name, "999", "999");
    expect(await ownerSays(`/pairing approve ${old.code}`, `No open pairing code ${old.code}`)).toBeDefined();
    await ownerSays(`/pairing approve ${code}`, "Approved");
    await ownerSays(`/pairing approve ${code} `, `No open pairing code ${code}`);
    expect(
      outside()
        .approved()
        .map((a) => a.senderId),
    ).toEqual([rig.strangerSender]);
  });

  it("someone who is not an owner cannot approve with /pairing", async () => {
    const code = await strangerGetsCode();
    await outside().approve(code, "cli");
    await welcomed();
    // The newcomer, let in, tries to let in someone else.
    const other = await outside().request(driver.name, "4242", "4242");
    await rig.userSends(rig.strangerSender, `/pairing approve ${other.code}`);
    await waitFor(() => rig.texts().some((t) => t.startsWith("Only the owner")), undefined, "the refusal");
    expect(
      outside()
        .pending()
        .map((p) => p.code),
    ).toEqual([other.code]);
    expect(outside().isApproved(driver.name, "4242")).toBe(false);
  });

  it("revoked: refused again, and the reminders they set stop", async () => {
    const code = await strangerGetsCode();
    await outside().approve(code, "cli");
    await welcomed();
    const { chatId } = outside().approved()[0]!;
    const job = await gateway.agent.cron.add({
      message: "reminder: stretch",
      schedule: { kind: "every", everyMs: 300 },
      channel: driver.name,
      to: chatId,
      creator: { kind: "sender", channel: driver.name, senderId: rig.strangerSender },
    });
    await waitFor(
      () => rig.texts().some((t) => t.startsWith("re: ") && t.includes("reminder: stretch")),
      undefined,
      "a reminder delivered",
    );

    expect(await outside().revoke(driver.name, rig.strangerSender)).toBe(true);
    const disabled = async () => {
      const { jobs } = await gateway.agent.cron.store.read();
      const state = jobs.find((j) => j.id === job.id);
      return state?.enabled === false && /nor approved by pairing/.test(state.state.lastError ?? "");
    };
    await waitFor(disabled, undefined, "the reminder disabled");

    await rig.userSends(rig.strangerSender, "am I still in?");
    await ownerSays("barrier", "re: barrier");
    expect(askedOfModel()).not.toContain("am I still in?");
  });

  it("in a group chat a stranger gets no code: groups keep their own policy", async () => {
    await rig.userSendsInGroup(rig.strangerSender, "let me in please");
    // The usual refusal notice, in the group, and no code anywhere.
    await waitFor(() => rig.groupTexts().some((t) => t.includes("allow list")), undefined, "the refusal");
    expect(rig.texts().some((t) => CODE.test(t))).toBe(false);
    expect(outside().pending()).toEqual([]);
    expect(llm.requests).toHaveLength(0);
  });

  it("an approved person is still not let in in a group", async () => {
    const code = await strangerGetsCode();
    await outside().approve(code, "cli");
    await welcomed();
    await rig.userSendsInGroup(rig.strangerSender, "group question");
    // Told once an hour already (the code): no notice now. The owner's message after it in the same
    // group is a barrier: once it is answered, the newcomer's was handled.
    await rig.userSendsInGroup(rig.allowedSender, "barrier");
    await waitFor(
      () => rig.groupTexts().includes("re: barrier"),
      undefined,
      "the owner answered in the group",
    );
    expect(askedOfModel()).not.toContain("group question");
  });
});
