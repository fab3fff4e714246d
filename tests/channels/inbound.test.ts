import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { MessageBus } from "../../src/bus/bus.js";
import type { InboundMessage, OutboundMessage } from "../../src/bus/types.js";
import { ALLOW_FROM_ONLY, NoticeLimiter } from "../../src/channels/access.js";
import { InboundGate } from "../../src/channels/inbound-gate.js";
import {
  INTERRUPTED_DOWNLOAD_NOTE,
  InboundPath,
  type IncomingFile,
  type CompleteMessage,
} from "../../src/channels/inbound.js";
import { MediaTooLargeError } from "../../src/channels/media.js";
import type { InboundSink } from "../../src/channels/types.js";
import { ChannelError } from "../../src/util/errors.js";
import { createGate, type Gate } from "../helpers/gate.js";
import { captureLog } from "../helpers/log.js";
import { waitFor } from "../helpers/wait.js";

interface Recorded {
  sink: InboundSink;
  asked: string[];
  published: InboundMessage[];
  refused: InboundMessage[];
  reserved: InboundMessage[];
  cancelled: number;
}

function recordingSink(allowed: (msg: InboundMessage) => boolean = () => true): Recorded {
  const rec: Recorded = {
    asked: [],
    published: [],
    refused: [],
    reserved: [],
    cancelled: 0,
    sink: undefined!,
  };
  rec.sink = {
    allows: (msg) => {
      rec.asked.push(msg.senderId);
      return allowed(msg);
    },
    publishInbound: (msg) => void rec.published.push(msg),
    refuse: (msg) => void rec.refused.push(msg),
    reserve: (msg) => {
      rec.reserved.push(msg);
      return { publish: (m) => void rec.published.push(m), cancel: () => void rec.cancelled++ };
    },
  };
  return rec;
}

function message(content: string, senderId = "alice"): InboundMessage {
  return { channel: "test", senderId, chatId: "c1", content };
}

let dir: string;
let lifetime: AbortController;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), "palaver-inbound-"));
  lifetime = new AbortController();
});
afterEach(async () => {
  lifetime.abort();
  await rm(dir, { recursive: true, force: true });
});

function file(
  name: string,
  opts: { kind?: IncomingFile["kind"]; gate?: Gate; fail?: Error; sizeBytes?: number } = {},
) {
  const fetched: string[] = [];
  const incoming: IncomingFile = {
    kind: opts.kind ?? "file",
    label: opts.kind === "voice" ? "voice message" : "file",
    name,
    ...(opts.sizeBytes !== undefined ? { sizeBytes: opts.sizeBytes } : {}),
    fetch: async () => {
      fetched.push(name);
      if (opts.gate) await opts.gate.opened;
      if (opts.fail) throw opts.fail;
      const path = join(dir, name);
      await writeFile(path, "data");
      return path;
    },
  };
  return { incoming, fetched };
}

function path(extra: Partial<ConstructorParameters<typeof InboundPath>[0]> = {}) {
  const notices: string[] = [];
  const accepted: string[] = [];
  const { log } = captureLog();
  const inbound = new InboundPath({
    signal: lifetime.signal,
    maxMediaBytes: 1000,
    notify: async (_msg, text) => void notices.push(text),
    onAccepted: (msg) => void accepted.push(msg.content),
    log,
    ...extra,
  });
  return { inbound, notices, accepted };
}

describe("InboundPath", () => {
  it("asks the gate once, and a refused sender's files are never fetched, reacted to or journaled", async () => {
    const rec = recordingSink(() => false);
    const { inbound, accepted } = path();
    const photo = file("photo.jpg");
    inbound.take(rec.sink, {
      conversation: "c1",
      inbound: message("hi", "mallory"),
      files: [photo.incoming],
    });
    expect(rec.asked).toEqual(["mallory"]);
    expect(photo.fetched).toEqual([]);
    expect(accepted).toEqual([]);
    expect(rec.reserved).toEqual([]);
    expect(rec.published).toEqual([]);
    expect(rec.refused.map((m) => m.senderId)).toEqual(["mallory"]);
  });

  it("through the real gate: one `allows` per message, and a refused one gets one refusal, never the bus", async () => {
    const bus = new MessageBus();
    const onBus: string[] = [];
    bus.onInbound((m) => void onBus.push(m.content));
    let allowsCalls = 0;
    const notified: OutboundMessage[] = [];
    const gate = new InboundGate({
      bus,
      access: { ...ALLOW_FROM_ONLY, allows: (...args) => (allowsCalls++, ALLOW_FROM_ONLY.allows(...args)) },
      notices: new NoticeLimiter(),
      log: captureLog().log,
      intakeOpen: () => true,
      notify: (m) => void notified.push(m),
    });
    const sink = gate.sinkFor("test", ["alice"]);
    const { inbound } = path();
    inbound.take(sink, { conversation: "c1", inbound: message("let me in", "mallory"), files: [] });
    expect(allowsCalls).toBe(1);
    expect(notified.map((m) => m.chatId)).toEqual(["c1"]);
    expect(notified[0]!.content).toContain("Your test user id is mallory");
    inbound.take(sink, { conversation: "c1", inbound: message("hi"), files: [] });
    expect(allowsCalls).toBe(2);
    expect(onBus).toEqual(["hi"]);
    expect(notified).toHaveLength(1);
  });

  it("lets the channel answer a message itself (Telegram's /start), in its conversation's order, never published", async () => {
    const rec = recordingSink();
    const { inbound } = path();
    const gate = createGate();
    const answered: string[] = [];
    inbound.take(rec.sink, {
      conversation: "c1",
      inbound: message("look"),
      files: [file("a.txt", { gate }).incoming],
    });
    inbound.take(rec.sink, {
      conversation: "c1",
      inbound: message("/start"),
      files: [],
      answer: async () => void answered.push(`greeted after ${rec.published.length} published`),
    });
    expect(answered).toEqual([]); // behind the download, like any message of the chat
    gate.open();
    await waitFor(() => answered.length === 1);
    expect(answered).toEqual(["greeted after 1 published"]);
    expect(rec.published.map((m) => m.content)).toEqual(["look"]);
    expect(rec.reserved.map((m) => m.content)).toEqual([`look\n${INTERRUPTED_DOWNLOAD_NOTE}`]);
  });

  it("refuses a stranger's /start like any message: the channel does not answer it", () => {
    const rec = recordingSink(() => false);
    const { inbound } = path();
    const answered: string[] = [];
    inbound.take(rec.sink, {
      conversation: "c1",
      inbound: message("/start", "mallory"),
      files: [],
      answer: async () => void answered.push("greeted"),
    });
    expect(rec.refused.map((m) => m.content)).toEqual(["/start"]);
    expect(answered).toEqual([]);
  });

  it("publishes a plain message at once", () => {
    const rec = recordingSink();
    const { inbound, accepted } = path();
    inbound.take(rec.sink, { conversation: "c1", inbound: message("hi"), files: [] });
    expect(rec.published.map((m) => m.content)).toEqual(["hi"]);
    expect(rec.reserved).toEqual([]);
    expect(accepted).toEqual(["hi"]);
  });

  it("journals a message with files before fetching them, with a note for a restart, then publishes it complete", async () => {
    const rec = recordingSink();
    const { inbound } = path();
    const gate = createGate();
    const doc = file("report.pdf", { gate });
    inbound.take(rec.sink, { conversation: "c1", inbound: message("look"), files: [doc.incoming] });
    expect(rec.reserved.map((m) => m.content)).toEqual([`look\n${INTERRUPTED_DOWNLOAD_NOTE}`]);
    expect(rec.published).toEqual([]);
    gate.open();
    await waitFor(() => rec.published.length === 1);
    expect(rec.published[0]!.content).toBe("look");
    expect(rec.published[0]!.media).toEqual([join(dir, "report.pdf")]);
  });

  it("keeps arrival order per conversation, and journals a text queued behind a download at once", async () => {
    const rec = recordingSink();
    const { inbound } = path();
    const gate = createGate();
    inbound.take(rec.sink, {
      conversation: "c1",
      inbound: message("first"),
      files: [file("a.txt", { gate }).incoming],
    });
    inbound.take(rec.sink, { conversation: "c1", inbound: message("second"), files: [] });
    inbound.take(rec.sink, { conversation: "c2", inbound: message("elsewhere"), files: [] });
    // The text waits behind the download, but is journaled now: the platform was already acknowledged.
    expect(rec.reserved.map((m) => m.content)).toEqual([`first\n${INTERRUPTED_DOWNLOAD_NOTE}`, "second"]);
    expect(rec.published.map((m) => m.content)).toEqual(["elsewhere"]);
    gate.open();
    await waitFor(() => rec.published.length === 3);
    expect(rec.published.map((m) => m.content)).toEqual(["elsewhere", "first", "second"]);
  });

  it("publishes an urgent message (/stop) ahead of the queue", () => {
    const rec = recordingSink();
    const { inbound } = path();
    inbound.take(rec.sink, {
      conversation: "c1",
      inbound: message("slow"),
      files: [file("a.txt", { gate: createGate() }).incoming],
    });
    inbound.take(rec.sink, { conversation: "c1", inbound: message("/stop"), files: [], urgent: true });
    expect(rec.published.map((m) => m.content)).toEqual(["/stop"]);
  });

  it("tells the user about a file that is too large, without fetching it, and notes it for the model", async () => {
    const rec = recordingSink();
    const { inbound, notices } = path();
    const big = file("big.zip", { sizeBytes: 5000 });
    inbound.take(rec.sink, { conversation: "c1", inbound: message("here"), files: [big.incoming] });
    await waitFor(() => rec.published.length === 1);
    expect(big.fetched).toEqual([]);
    expect(notices).toEqual([
      "Sorry, I can't take files over 1000 bytes, so I didn't look at: big.zip (5 KB).",
    ]);
    expect(rec.published[0]!.content).toBe(
      'here\n[file "big.zip" not downloaded: the file is larger than the 1000 bytes limit]',
    );
  });

  it("reports a too-large error found while fetching, and a failed download with our own reason only", async () => {
    const rec = recordingSink();
    const { inbound, notices } = path();
    const streamed = file("stream.bin", { fail: new MediaTooLargeError(undefined, 1000) });
    const denied = file("secret.txt", { fail: new ChannelError("the bot may not read this file") });
    const broken = file("x.txt", { fail: new Error("socket hang up https://files.example/?token=abc") });
    inbound.take(rec.sink, {
      conversation: "c1",
      inbound: message(""),
      files: [streamed.incoming, denied.incoming, broken.incoming],
    });
    await waitFor(() => rec.published.length === 1);
    expect(notices).toEqual(["Sorry, I can't take files over 1000 bytes, so I didn't look at: stream.bin."]);
    expect(rec.published[0]!.content.split("\n")).toEqual([
      '[file "stream.bin" not downloaded: the file is larger than the 1000 bytes limit]',
      '[file "secret.txt" could not be downloaded: the bot may not read this file]',
      '[file "x.txt" could not be downloaded]',
    ]);
  });

  it("transcribes voice messages when a transcriber is configured, and says so when it fails", async () => {
    const rec = recordingSink();
    const heard: string[] = [];
    const { inbound } = path({
      transcriber: {
        transcribe: async (p) => {
          heard.push(p);
          if (p.endsWith("bad.ogg")) throw new Error("whisper down");
          return "buy milk";
        },
      },
    });
    inbound.take(rec.sink, {
      conversation: "c1",
      inbound: message(""),
      files: [file("note.ogg", { kind: "voice" }).incoming, file("bad.ogg", { kind: "voice" }).incoming],
    });
    await waitFor(() => rec.published.length === 1);
    expect(heard).toHaveLength(2);
    expect(rec.published[0]!.content.split("\n")).toEqual([
      "[voice message, transcribed: buy milk]",
      "[voice message: transcription failed; the audio file is attached]",
    ]);
    expect(rec.published[0]!.media).toHaveLength(2);
  });

  it("waits for a message to complete (an album), and cancels the reservation when it is not for the bot", async () => {
    const rec = recordingSink();
    const { inbound, accepted } = path();
    let complete!: (done: CompleteMessage | null) => void;
    const completes = new Promise<CompleteMessage | null>((resolve) => (complete = resolve));
    inbound.take(rec.sink, { conversation: "c1", inbound: message("part"), files: [], completes });
    expect(rec.reserved).toHaveLength(1);
    expect(accepted).toEqual([]); // not known yet whether it is for the bot
    complete(null);
    await waitFor(() => rec.cancelled === 1);
    expect(rec.published).toEqual([]);
    expect(accepted).toEqual([]);
  });

  it("leaves a reserved message for the journal's replay when the channel stops mid-download", async () => {
    const rec = recordingSink();
    const { inbound } = path();
    const gate = createGate();
    inbound.take(rec.sink, {
      conversation: "c1",
      inbound: message("look"),
      files: [file("a.txt", { gate }).incoming],
    });
    lifetime.abort();
    gate.open();
    expect(await inbound.settle(30_000)).toBe(true);
    expect(rec.published).toEqual([]);
    expect(rec.cancelled).toBe(0);
  });
});
