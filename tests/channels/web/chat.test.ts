/**
 * Conversations through the web chat against a real gateway and the fake LLM: a message lands in
 * session web:<id>, every tab on it sees the reply (streamed first), the history comes back from
 * the session file, /stop ends a turn, a question is answered with its button, and an upload
 * reaches the model as an attachment.
 */
import { mkdir, readdir, readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import type { HistoryMessage, SendAccepted, UploadResult } from "../../../src/channels/web/protocol.js";
import { lastUserText, toolCall } from "../../fakes/openai-server.js";
import { FakeTelegram } from "../../fakes/telegram-server.js";
import { waitFor } from "../../helpers/wait.js";
import { WebRig } from "./harness.js";

let rig: WebRig | undefined;
afterEach(async () => {
  await rig?.close();
  rig = undefined;
});

describe("web chat conversations", () => {
  it("puts a message of conversation X in session web:X, gives the reply to both tabs and the history after a reload", async () => {
    rig = await WebRig.start();
    rig.fake.setHandler((req) => ({ content: `re: ${lastUserText(req)}`, pieceDelayMs: 5 }));
    const tabA = await rig.subscribe("conv1");
    const tabB = await rig.subscribe("conv1", await rig.login());
    const other = await rig.subscribe("conv2");

    const sent = await rig.post("/api/conversations/conv1/messages", { text: "hello there" });
    expect(sent.status).toBe(401); // the page's fetch carries its cookie: without it, no
    const accepted = await rig.post(
      "/api/conversations/conv1/messages",
      { text: "hello there" },
      rig.bearer(),
    );
    expect(accepted.status).toBe(202);
    const { messageId } = accepted.json<SendAccepted>();

    for (const tab of [tabA, tabB]) {
      await rig.waitForEvent(tab, "final", (e) => e.text === "re: hello there");
      const types = tab.map((e) => e.type).filter((t) => t !== "ping");
      expect(types[0]).toBe("user");
      expect(types).toContain("turnStart");
      expect(types).toContain("delta");
      expect(types.indexOf("delta")).toBeLessThan(types.indexOf("final"));
      await rig.waitForEvent(tab, "turnEnd", (e) => e.outcome === "done");
    }
    expect(tabA[0]).toEqual({ type: "user", conversationId: "conv1", messageId, text: "hello there" });
    expect(other.filter((e) => e.type !== "ping")).toEqual([]);

    const file = await readFile(join(rig.dir, "ws", "sessions", "web_conv1.jsonl"), "utf8");
    expect(file).toContain('"key":"web:conv1"');
    expect(file).toContain('"content":"re: hello there"');

    await rig.gateway.agent.sessions.flush();
    const history = await rig.request("/api/conversations/conv1/messages", { headers: rig.bearer() });
    expect(history.json<HistoryMessage[]>().map(({ role, content }) => ({ role, content }))).toEqual([
      { role: "user", content: "hello there" },
      { role: "assistant", content: "re: hello there" },
    ]);
    const list = await rig.request("/api/conversations", { headers: rig.bearer() });
    expect(list.json()).toEqual([
      expect.objectContaining({ id: "conv1", title: "hello there", busy: false }),
    ]);
  });

  it("shows the whole conversation in the history, the consolidated messages memory let go of included", async () => {
    rig = await WebRig.start();
    rig.fake.setHandler((req) => ({ content: `re: ${lastUserText(req)}` }));
    const tab = await rig.subscribe("long");
    for (const text of ["first", "second"]) {
      await rig.post("/api/conversations/long/messages", { text }, rig.bearer());
      await rig.waitForEvent(tab, "final", (e) => e.text === `re: ${text}`);
      await rig.waitForEvent(tab, "turnEnd", (e) => e.outcome === "done");
    }
    // As a consolidation of the first exchange leaves it.
    const session = await rig.gateway.agent.sessions.get("web:long");
    session.lastConsolidated = 2;
    session.forgetConsolidated();
    expect(session.messages).toHaveLength(2);

    await rig.gateway.agent.sessions.flush();
    const history = await rig.request("/api/conversations/long/messages", { headers: rig.bearer() });
    expect(history.json<HistoryMessage[]>().map((m) => m.content)).toEqual([
      "first",
      "re: first",
      "second",
      "re: second",
    ]);
  });

  it("stops a running turn with POST /stop", async () => {
    rig = await WebRig.start();
    rig.fake.setHandler(() => ({ content: "a very slow answer ".repeat(50), pieceDelayMs: 200 }));
    const tab = await rig.subscribe("slow");
    await rig.post("/api/conversations/slow/messages", { text: "take your time" }, rig.bearer());
    await rig.waitForEvent(tab, "delta");
    const list = await rig.request("/api/conversations", { headers: rig.bearer() });
    expect(list.json()).toEqual([expect.objectContaining({ id: "slow", busy: true })]);
    // A tab opened (or reloaded) now: the session file has nothing yet, the replay has the turn.
    const late = await rig.subscribe("slow");
    await rig.waitForEvent(late, "delta");
    expect(late.slice(0, 3).map((e) => e.type)).toEqual(["user", "turnStart", "delta"]);
    expect(late[0]).toMatchObject({ text: "take your time" });

    const stop = await rig.post("/api/conversations/slow/stop", {}, rig.bearer());
    expect(stop.status).toBe(202);
    await rig.waitForEvent(tab, "turnEnd", (e) => e.outcome === "stopped");
  });

  it("shows a question with buttons and takes the answer through POST /api/questions", async () => {
    rig = await WebRig.start();
    rig.fake.enqueue(
      { toolCalls: [toolCall("ask_human", { question: "Tea or coffee?", options: ["tea", "coffee"] })] },
      { content: "Tea it is." },
    );
    const tab = await rig.subscribe("q");
    await rig.post("/api/conversations/q/messages", { text: "make me a drink" }, rig.bearer());
    const question = await rig.waitForEvent(tab, "question");
    expect(question.text).toContain("Tea or coffee?");
    const tea = question.choices.find((c) => c.label === "tea");
    expect(tea).toBeDefined();

    // A tab opened now sees the open question too.
    const late = await rig.subscribe("q");
    await rig.waitForEvent(late, "question", (e) => e.questionId === question.questionId);

    const answer = await rig.post(
      `/api/questions/${question.questionId}`,
      { choiceId: tea!.id },
      rig.bearer(),
    );
    expect(answer.status).toBe(200);
    expect(answer.json()).toMatchObject({ accepted: true });
    await rig.waitForEvent(tab, "questionClosed", (e) => e.questionId === question.questionId);
    await rig.waitForEvent(tab, "final", (e) => e.text === "Tea it is.");
    const toolResult = rig.fake.requests[1]?.body.messages.find((m) => m.role === "tool");
    expect(JSON.stringify(toolResult)).toContain("tea");

    const again = await rig.post(
      `/api/questions/${question.questionId}`,
      { choiceId: tea!.id },
      rig.bearer(),
    );
    expect(again.json()).toMatchObject({ accepted: false });
  });

  it("gives an uploaded file to the model as an attachment", async () => {
    rig = await WebRig.start();
    rig.fake.setHandler(() => ({ content: "got it" }));
    const tab = await rig.subscribe("files");
    const upload = await rig.request("/api/uploads?name=my%20notes.txt", {
      method: "POST",
      headers: rig.bearer(),
      body: "the secret word is swordfish",
    });
    expect(upload.status).toBe(201);
    const { id, name, bytes } = upload.json<UploadResult>();
    expect({ name, bytes }).toEqual({ name: "my_notes.txt", bytes: 28 });
    // Not sent in a conversation yet: waiting where no chat's turn can reach it.
    const pending = join(rig.dir, "ws", "media", "web", ".pending");
    expect((await readdir(pending)).filter((f) => f.endsWith("my_notes.txt"))).toHaveLength(1);

    await rig.post("/api/conversations/files/messages", { text: "read this", uploads: [id] }, rig.bearer());
    const user = await rig.waitForEvent(tab, "user");
    expect(user.files).toEqual([{ name: "my_notes.txt", bytes: 28 }]);
    await rig.waitForEvent(tab, "final", (e) => e.text === "got it");
    const text = lastUserText(rig.fake.requests[0]!);
    const path = /\[Attached file: (.+)\]/.exec(text)?.[1];
    // Moved into the conversation's own media folder, the one its turns can read.
    expect(path).toContain(join("ws", "media", "web", "files", ""));
    expect(await readdir(pending)).toEqual([]);
    expect(await readFile(path!, "utf8")).toBe("the secret word is swordfish");

    // An upload is used once.
    const reused = await rig.post(
      "/api/conversations/files/messages",
      { text: "again", uploads: [id] },
      rig.bearer(),
    );
    expect(reused.status).toBe(400);

    await waitFor(async () => {
      const history = await rig!.request("/api/conversations/files/messages", { headers: rig!.bearer() });
      return history.json<HistoryMessage[]>().length === 2;
    });
    const history = await rig.request("/api/conversations/files/messages", { headers: rig.bearer() });
    expect(history.json<HistoryMessage[]>()[0]).toMatchObject({
      role: "user",
      content: "read this",
      files: [{ name: "my_notes.txt" }],
    });
  });

  it("transcribes a voice note uploaded in the chat, as it does a Telegram one, and the model reads the transcript", async () => {
    // The speech endpoint the Telegram voice tests use (OpenAI's /audio/transcriptions).
    const speech = await FakeTelegram.start();
    try {
      speech.transcript = "remind me to buy milk";
      rig = await WebRig.start({
        providers: { whisper: { apiBase: speech.transcriptionBaseURL, apiKey: "k" } },
        transcription: { provider: "whisper", model: "whisper-large" },
      });
      rig.fake.setHandler(() => ({ content: "noted" }));
      const tab = await rig.subscribe("voice");
      const upload = await rig.request("/api/uploads?name=voice-note.ogg", {
        method: "POST",
        headers: { ...rig.bearer(), "content-type": "audio/ogg; codecs=opus" },
        body: Buffer.from("OggS fake opus"),
      });
      expect(upload.status).toBe(201);
      const { id } = upload.json<UploadResult>();
      const sent = await rig.post(
        "/api/conversations/voice/messages",
        { text: "", uploads: [id] },
        rig.bearer(),
      );
      expect(sent.status).toBe(202);
      await rig.waitForEvent(tab, "final", (e) => e.text === "noted");
      expect(speech.transcriptions).toHaveLength(1);
      expect(speech.transcriptions[0]).toMatchObject({ model: "whisper-large", size: 14 });
      expect(speech.transcriptions[0]!.fileName).toMatch(/voice-note\.ogg$/);
      expect(lastUserText(rig.fake.requests[0]!)).toContain(
        "[audio file, transcribed: remind me to buy milk]",
      );
    } finally {
      await speech.close();
    }
  });

  it("lets the page download a file the agent sends, by an opaque id", async () => {
    rig = await WebRig.start();
    await mkdir(join(rig.dir, "ws"), { recursive: true });
    await writeFile(join(rig.dir, "ws", "report.txt"), "all systems go");
    rig.fake.enqueue(
      { toolCalls: [toolCall("message", { content: "here it is", media: ["report.txt"] })] },
      { content: "sent" },
    );
    const tab = await rig.subscribe("out");
    await rig.post("/api/conversations/out/messages", { text: "send me the report" }, rig.bearer());
    const final = await rig.waitForEvent(tab, "final", (e) => e.text === "here it is");
    expect(final.files).toEqual([{ id: expect.any(String) as unknown, name: "report.txt", bytes: 14 }]);
    const id = final.files![0]!.id!;
    expect(id).not.toContain("report");

    expect((await rig.request(`/api/files/${id}`)).status).toBe(401);
    const file = await rig.request(`/api/files/${id}`, { headers: rig.bearer() });
    expect(file.status).toBe(200);
    expect(file.body).toBe("all systems go");
    expect(file.headers["content-disposition"]).toBe("attachment; filename*=UTF-8''report.txt");
    expect(file.headers["content-type"]).toBe("application/octet-stream");
    expect((await rig.request("/api/files/unknown", { headers: rig.bearer() })).status).toBe(404);
  });
});
