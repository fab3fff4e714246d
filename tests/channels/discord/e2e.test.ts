/**
 * End to end: Gateway + the real Discord adapter (real discord.js) against
 * the loopback FakeDiscord, and the agent against FakeOpenAI.
 */
import { readdir, readFile } from "node:fs/promises";
import { join } from "node:path";
import { pino } from "pino";
import { afterEach, describe, expect, it } from "vitest";
import { openFence } from "../../../src/channels/text.js";
import { EPHEMERAL, INTENTS } from "../../fakes/discord-server.js";
import { lastUserText } from "../../fakes/openai-server.js";
import { startWorld, type World } from "./world.js";

let world: World | undefined;
afterEach(async () => {
  await world?.close();
  world = undefined;
});

describe("Discord end to end", () => {
  it("gets ready (JSON gateway, no compression, slash commands registered) and answers a DM", async () => {
    world = await startWorld();
    const { fake, llm, alice } = world;
    expect(fake.connections[0]!.query).toEqual({ v: "10", encoding: "json" });
    const identify = fake.framesWithOp(2)[0]!.d as { intents: number; compress: boolean };
    expect(identify.intents).toBe(
      INTENTS.Guilds | INTENTS.GuildMessages | INTENTS.DirectMessages | INTENTS.MessageContent,
    );
    expect(identify.compress).toBe(false);
    expect(fake.calls("PUT", /^\/applications\/\d+\/commands$/)).toHaveLength(1);
    expect(fake.commands.map((c) => c.name).sort()).toEqual([
      "help",
      "memory",
      "new",
      "status",
      "stop",
      "usage",
    ]);

    llm.setHandler((req) => ({ content: `re: ${lastUserText(req)}` }));
    const dm = fake.dmChannel(alice);
    fake.userMessage({ channelId: dm.id, author: alice, content: "hello there" });
    await fake.waitFor(() => world!.sentTo(dm.id).length === 1, 5000, "the DM reply");
    expect(world.sentTo(dm.id)).toEqual(["re: hello there"]);
    // The echo of its own reply came back over the gateway before a later message, which is
    // answered only after it: still one request per user message, so the echo was not one.
    fake.userMessage({ channelId: dm.id, author: alice, content: "and again" });
    await fake.waitFor(() => world!.sentTo(dm.id).length === 2, 5000, "the later reply");
    expect(llm.requests.map(lastUserText)).toEqual(["hello there", "and again"]);
    const session = await readFile(join(world.workspace, "sessions", `discord_${dm.id}.jsonl`), "utf8");
    expect(session).toContain("re: hello there");
  });

  it("ignores a guild message without a mention and answers a mention in the same channel", async () => {
    world = await startWorld();
    const { fake, llm, alice, general, mention } = world;
    llm.setHandler((req) => ({ content: `re: ${lastUserText(req)}` }));
    fake.userMessage({ channelId: general.id, author: alice, content: "just chatting" });
    fake.userMessage({
      channelId: general.id,
      author: alice,
      content: `${mention} what is 2+2?`,
      mentions: [fake.bot],
    });
    await fake.waitFor(() => world!.sentTo(general.id).length === 1, 5000, "the channel reply");
    expect(world.sentTo(general.id)).toEqual(["re: what is 2+2?"]);
    expect(llm.requests.map(lastUserText)).toEqual(["what is 2+2?"]);

    // A reply to the bot's message counts as addressing it, and carries what it replies to.
    const botMessage = fake.sent[0]!.message;
    fake.userMessage({
      channelId: general.id,
      author: alice,
      content: "and times 3?",
      replyTo: botMessage.id,
    });
    await fake.waitFor(() => world!.sentTo(general.id).length === 2, 5000, "the reply to a reply");
    expect(lastUserText(llm.requests[1]!)).toBe(
      '[In reply to your earlier message: "re: what is 2+2?"]\n\nand times 3?',
    );
  });

  it("routes a thread message to the thread's own session and answers in the thread", async () => {
    world = await startWorld();
    const { fake, llm, alice, general, mention } = world;
    llm.setHandler((req) => ({ content: `thread says: ${lastUserText(req)}` }));
    const thread = fake.createThread({ parentId: general.id, name: "planning", owner: alice });
    fake.userMessage({
      channelId: thread.id,
      author: alice,
      content: `${mention} plan it`,
      mentions: [fake.bot],
    });
    await fake.waitFor(() => world!.sentTo(thread.id).length === 1, 5000, "the thread reply");
    expect(world.sentTo(thread.id)).toEqual(["thread says: plan it"]);
    expect(world.sentTo(general.id)).toEqual([]);
    const sessions = await readdir(join(world.workspace, "sessions"));
    expect(sessions).toContain(`discord_${thread.id}.jsonl`);
    expect(sessions).not.toContain(`discord_${general.id}.jsonl`);
  });

  it("ignores messages from bots", async () => {
    world = await startWorld({ discord: { allowFrom: ["*"] } });
    const { fake, llm, general, mention } = world;
    const otherBot = fake.addUser("helperbot", { bot: true });
    fake.userMessage({ channelId: fake.dmChannel(otherBot).id, author: otherBot, content: "hello bot" });
    fake.userMessage({
      channelId: general.id,
      author: otherBot,
      content: `${mention} hi`,
      mentions: [fake.bot],
    });
    // A person's message after them is answered, so the bots' were seen first and dropped.
    fake.userMessage({
      channelId: general.id,
      author: world.alice,
      content: `${mention} me`,
      mentions: [fake.bot],
    });
    await fake.waitFor(() => world!.sentTo(general.id).length === 1, 5000, "the reply to the person");
    expect(llm.requests.map(lastUserText)).toEqual(["me"]);
  });

  it("downloads attachments: images go to the model as images, files by path, too large ones noted and told", async () => {
    world = await startWorld({ channels: { maxMediaBytes: 1024 } });
    const { fake, llm, alice } = world;
    const png = Buffer.from(
      "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==",
      "base64",
    );
    const dm = fake.dmChannel(alice);
    fake.userMessage({
      channelId: dm.id,
      author: alice,
      content: "what do you see?",
      attachments: [
        fake.addAttachment("pic.png", png, "image/png"),
        fake.addAttachment("my notes.txt", "buy milk", "text/plain"),
        fake.addAttachment("huge.bin", Buffer.alloc(4096), "application/octet-stream"),
      ],
    });
    await fake.waitFor(() => llm.requests.length === 1, 5000, "the LLM request");
    // In the chat's own media folder: the only one its turns can reach.
    const folder = join(world.workspace, "media", "discord", dm.id);
    const files = await readdir(folder);
    expect(files).toHaveLength(2);
    const notes = files.find((f) => f.endsWith("-my_notes.txt"));
    expect(notes).toBeDefined();
    expect(await readFile(join(folder, notes!), "utf8")).toBe("buy milk");

    const user = llm.requests[0]!.body.messages.filter((m) => m.role === "user").pop()!;
    const parts = user.content as { type: string; image_url?: { url: string }; text?: string }[];
    expect(parts[0]).toEqual({
      type: "image_url",
      image_url: { url: `data:image/png;base64,${png.toString("base64")}` },
    });
    const text = parts.find((p) => p.type === "text")!.text!;
    expect(text).toContain("what do you see?");
    expect(text).toContain('[file "huge.bin" not downloaded: the file is larger than the 1 KB limit]');
    // The person is told too, in the chat (one wording on every platform).
    expect(world.sentTo(dm.id)).toContain(
      "Sorry, I can't take files over 1 KB, so I didn't look at: huge.bin (4 KB).",
    );
    expect(text).toMatch(/\[Attached file: .*media\/discord\/\d+\/\d{8}-[0-9a-f]{8}-my_notes\.txt\]/);
    // The one over the limit was refused by its declared size, without being fetched.
    expect(fake.requests.filter((r) => r.path.startsWith("/attachments/")).map((r) => r.path)).toEqual([
      expect.stringMatching(/\/pic\.png$/),
      expect.stringMatching(/\/my notes\.txt$/),
    ]);
  });

  it("splits a 4,500-character reply with a code block into valid Discord messages", async () => {
    world = await startWorld();
    const { fake, llm, alice } = world;
    const code = Array.from({ length: 70 }, (_, i) => `print("line ${i} of the program")`).join("\n");
    const prose = "Here is the script you asked for. ".repeat(33);
    const reply = `${prose}\n\n\`\`\`python\n${code}\n\`\`\`\n\n${prose}`;
    expect(reply.length).toBeGreaterThan(4400);
    expect(reply.length).toBeLessThan(4700);
    llm.enqueue({ content: reply });
    llm.enqueue({ content: "the next answer" });
    const dm = fake.dmChannel(alice);
    fake.userMessage({ channelId: dm.id, author: alice, content: "write a script" });
    // The chat's next answer comes only after every chunk of this one went out.
    fake.userMessage({ channelId: dm.id, author: alice, content: "next" });
    await fake.waitFor(() => world!.sentTo(dm.id).includes("the next answer"), 5000, "the next answer");
    const chunks = world.sentTo(dm.id).slice(0, -1);
    expect(chunks).toHaveLength(3);
    for (const chunk of chunks) {
      expect(chunk.length).toBeLessThanOrEqual(2000);
      expect(openFence(chunk)).toBeNull();
    }
    expect(chunks.filter((c) => c.includes("```python")).length).toBeGreaterThanOrEqual(2);
    // Every line of the program arrived, in order.
    const all = chunks.join("\n");
    let at = 0;
    for (let i = 0; i < 70; i++) {
      at = all.indexOf(`print("line ${i} of the program")`, at);
      expect(at, `line ${i}`).toBeGreaterThanOrEqual(0);
    }
    // Discord rejected nothing (the fake answers > 2000 characters with a 400).
    expect(fake.calls("POST", /\/messages$/).every((r) => r.status === 200)).toBe(true);
  });

  it("shows typing while a slow turn runs and stops after the reply", async () => {
    world = await startWorld();
    const { fake, llm, alice } = world;
    const dm = fake.dmChannel(alice);
    const typingPosts = () => fake.calls("POST", `/channels/${dm.id}/typing`).length;
    // The LLM answers once three typing signals went out: a condition, not a clock.
    const clock = typingClock(world);
    llm.setHandler(async (req) => {
      if (lastUserText(req) !== "think hard") return clock.turn();
      await fake.waitFor(() => typingPosts() >= 3, 30_000, "three typing signals");
      return { content: "done thinking" };
    });
    fake.userMessage({ channelId: dm.id, author: alice, content: "think hard" });
    await fake.waitFor(() => world!.sentTo(dm.id).length === 1, 30_000, "the reply");
    expect(typingPosts()).toBeGreaterThanOrEqual(3); // at once, then every 100 ms here (8 s in production)
    await clock.expectStill(typingPosts);
  });

  it("tells a refused user its id once, and never runs the model for it", async () => {
    world = await startWorld();
    const { fake, llm, alice, bob } = world;
    const dm = fake.dmChannel(bob);
    fake.userMessage({ channelId: dm.id, author: bob, content: "hi" });
    await fake.waitFor(() => world!.sentTo(dm.id).length === 1, 5000, "the refusal");
    fake.userMessage({ channelId: dm.id, author: bob, content: "hello??" });
    // A barrier in the same channel: the adapter takes one channel's messages in arrival order and
    // judges the sender as it takes them, so once alice's message after it is answered, bob's second
    // was refused. (A real DM holds only bob; the fake lets alice speak there for this.)
    llm.setHandler((req) => ({ content: `re: ${lastUserText(req)}` }));
    fake.userMessage({ channelId: dm.id, author: alice, content: "marker" });
    await fake.waitFor(() => world!.sentTo(dm.id).includes("re: marker"), 30_000, "the answer to the marker");
    const sent = world.sentTo(dm.id);
    expect(sent).toHaveLength(2);
    expect(sent[0]).toContain(`Your discord user id is ${bob.id}`);
    expect(sent[0]).toContain("channels.discord.allowFrom");
    expect(llm.requests.map(lastUserText)).toEqual(["marker"]);
  });

  it("answers a stranger's slash command in a DM at once, privately, with the pairing code", async () => {
    world = await startWorld();
    const { fake, llm, bob } = world;
    const dm = fake.dmChannel(bob);
    const command = fake.slashCommand({ name: "help", user: bob, channelId: dm.id });
    // Deferred ephemeral within Discord's 3 s, then the deferred answer becomes the notice.
    const [deferral] = await fake.waitFor(
      () => fake.callbacksOf(command.id).length > 0 && fake.callbacksOf(command.id),
      5000,
      "the interaction answered",
    );
    expect(deferral).toEqual({ type: 5, data: { flags: EPHEMERAL } });
    const answer = await fake.waitFor(
      () => fake.sent.find((m) => m.interactionId === command.id && m.content !== ""),
      5000,
      "the pairing code",
    );
    expect(answer.via).toBe("interaction-original");
    expect(answer.content).toMatch(/pairing code: \S+/);
    expect(answer.content).toContain(`Your discord user id is ${bob.id}`);
    // Nothing in the channel for everyone to see, and the model never ran.
    expect(fake.sent.filter((m) => m.via === "channel")).toEqual([]);
    expect(llm.requests).toHaveLength(0);
  });

  it("answers a stranger's slash command in a server channel privately with the allow-list refusal", async () => {
    world = await startWorld();
    const { fake, bob, general } = world;
    const command = fake.slashCommand({ name: "new", user: bob, channelId: general.id });
    const answer = await fake.waitFor(
      () => fake.sent.find((m) => m.interactionId === command.id && m.content !== ""),
      5000,
      "the refusal",
    );
    expect(fake.callbacksOf(command.id)).toEqual([{ type: 5, data: { flags: EPHEMERAL } }]);
    expect(answer.content).toContain(`Your discord user id is ${bob.id}`);
    expect(answer.content).toContain("channels.discord.allowFrom");
    expect(world.sentTo(general.id)).toEqual([answer.content]);
  });

  it("answers a stranger already told within the hour briefly, rather than leaving the command failing", async () => {
    world = await startWorld({ adapter: { refusalNoticeWaitMs: 100 } });
    const { fake, bob } = world;
    const dm = fake.dmChannel(bob);
    fake.userMessage({ channelId: dm.id, author: bob, content: "hi" });
    await fake.waitFor(() => world!.sentTo(dm.id).length === 1, 5000, "the pairing notice");
    const command = fake.slashCommand({ name: "help", user: bob, channelId: dm.id });
    const answer = await fake.waitFor(
      () => fake.sent.find((m) => m.interactionId === command.id),
      5000,
      "the answer",
    );
    expect(fake.callbacksOf(command.id)).toEqual([{ type: 5, data: { flags: EPHEMERAL } }]);
    expect(answer.content).toBe("Sorry, I can't take commands from you here.");
  });

  it("never writes the bot token to the log, even at trace level", async () => {
    const lines: string[] = [];
    const log = pino({ level: "trace" }, { write: (line: string) => void lines.push(line) });
    // Shaped like a real token (three dot-separated parts), as discord.js's debug lines censor only the last.
    const token = "OTAwMDAwMDAwMDAwMDAwMDAx.GabcDe.secret-part-of-the-token";
    world = await startWorld({ fake: { token }, adapter: { log } });
    const { fake, alice, llm } = world;
    llm.enqueue({ content: "hello" });
    const dm = fake.dmChannel(alice);
    fake.userMessage({ channelId: dm.id, author: alice, content: "hi" });
    await fake.waitFor(() => world!.sentTo(dm.id).length === 1, 5000, "the reply");
    // The probe works: discord.js's own debug lines were logged.
    expect(
      lines.some((line) => line.includes("Heartbeat") || line.includes("Fetched Gateway Information")),
    ).toBe(true);
    for (const part of token.split(".")) expect(lines.filter((line) => line.includes(part))).toEqual([]);
  });

  it("stops a slow turn on /stop at once, and stops typing", async () => {
    world = await startWorld();
    const { fake, llm, alice } = world;
    llm.enqueue({ content: "too late", delayMs: 10_000 });
    const dm = fake.dmChannel(alice);
    fake.userMessage({ channelId: dm.id, author: alice, content: "write a novel" });
    await fake.waitFor(() => llm.requests.length === 1, 5000, "the LLM call");
    fake.userMessage({ channelId: dm.id, author: alice, content: "/stop" });
    await fake.waitFor(() => world!.sentTo(dm.id).length === 1, 5000, "the /stop answer");
    expect(world.sentTo(dm.id)).toEqual(["Stopped the running reply."]);
    const typing = () => fake.calls("POST", `/channels/${dm.id}/typing`).length;
    expect(typing()).toBeGreaterThanOrEqual(1);
    const clock = typingClock(world);
    llm.setHandler(() => clock.turn());
    await clock.expectStill(typing);
    expect(world.sentTo(dm.id)).toHaveLength(1);
  });

  it("resumes after the gateway closes with 4000, logs it, and loses no message", async () => {
    const logs: { msg: string; level: number }[] = [];
    const log = pino(
      { level: "info" },
      { write: (line: string) => logs.push(JSON.parse(line) as { msg: string; level: number }) },
    );
    world = await startWorld({ adapter: { log } });
    const { fake, llm, alice } = world;
    llm.setHandler((req) => ({ content: `re: ${lastUserText(req)}` }));
    const dm = fake.dmChannel(alice);
    fake.closeGateway(4000);
    // Sent while the bot is disconnected: Discord keeps it for the resumed session.
    fake.userMessage({ channelId: dm.id, author: alice, content: "are you there?" });
    await fake.waitFor(() => world!.sentTo(dm.id).length === 1, 5000, "the reply after resuming");
    expect(world.sentTo(dm.id)).toEqual(["re: are you there?"]);
    expect(fake.identifies).toBe(1);
    expect(fake.resumes).toBe(1);
    expect(fake.connections).toHaveLength(2);
    expect(fake.connections[1]!.path).toBe("/resume");
    expect(fake.connections[1]!.query).toEqual({ v: "10", encoding: "json" });
    expect(logs.map((l) => l.msg)).toEqual(
      expect.arrayContaining([
        "Discord gateway connection lost; reconnecting",
        "Discord gateway session resumed; missed events replayed",
      ]),
    );
  });

  it("defers a slash command within Discord's 3 s while a long turn holds the chat, and answers it", async () => {
    world = await startWorld();
    const { fake, llm, alice } = world;
    let release = () => {};
    const held = new Promise<void>((resolve) => (release = resolve));
    llm.setHandler(async (req) => {
      await held;
      return { content: `re: ${lastUserText(req)}` };
    });
    const dm = fake.dmChannel(alice);
    try {
      fake.userMessage({ channelId: dm.id, author: alice, content: "think it over" });
      await fake.waitFor(() => llm.requests.length === 1, 5000, "the turn to reach the model");
      const { id } = fake.slashCommand({ name: "status", user: alice, channelId: dm.id });
      const callback = new RegExp(`^/interactions/${id}/[^/]+/callback$`);
      const deferral = await fake.waitFor(() => fake.calls("POST", callback)[0], 5000, "the deferral");
      // Accepted: later than 3 s after the command, the fake (as Discord) answers 404 code 10062.
      expect(deferral).toMatchObject({ status: 204, body: { type: 5 } });
    } finally {
      release();
    }
    const answer = await fake.waitFor(
      () => fake.sent.find((m) => m.via === "interaction-original"),
      5000,
      "the command's answer",
    );
    expect(answer.content).toContain("Model: fake-model");
    await fake.waitFor(
      () => fake.sent.find((m) => m.via === "channel" && m.content === "re: think it over"),
      5000,
      "the turn's reply",
    );
  });

  it("answers slash commands through the interaction, deferred first", async () => {
    world = await startWorld();
    const { fake, alice, general, llm } = world;
    const { id } = fake.slashCommand({ name: "status", user: alice, channelId: general.id });
    const answer = await fake.waitFor(
      () => fake.sent.find((m) => m.interactionId === id),
      5000,
      "the interaction answer",
    );
    expect(answer.via).toBe("interaction-original");
    expect(answer.content).toContain("Model: fake-model");
    const callback = fake.calls("POST", new RegExp(`^/interactions/${id}/[^/]+/callback$`));
    expect(callback.map((r) => (r.body as { type: number }).type)).toEqual([5]);
    expect(callback[0]!.at).toBeLessThanOrEqual(answer.at);
    expect(world.sentTo(general.id)).toEqual([answer.content]); // nothing posted besides the interaction
    expect(llm.requests).toHaveLength(0);

    // The same commands work typed, after a mention.
    fake.userMessage({
      channelId: general.id,
      author: alice,
      content: `${world.mention} /help`,
      mentions: [fake.bot],
    });
    await fake.waitFor(() => world!.sentTo(general.id).length === 2, 5000, "the typed /help answer");
    expect(world.sentTo(general.id)[1]).toContain("/new — save what this conversation taught into memory");
  });
});

/**
 * Another chat's typing loop as the clock for "this one stopped typing": a slow turn in the
 * guild channel, whose typing signals (every 100 ms, as the watched chat's were) prove that
 * intervals passed. `turn()` is that turn's LLM answer; it ends when the check is done.
 */
function typingClock(world: World) {
  const { fake, alice, general, mention } = world;
  const ticks = () => fake.calls("POST", `/channels/${general.id}/typing`).length;
  let done = false;
  return {
    async turn() {
      await fake.waitFor(() => done, 30_000, "the typing check");
      return { content: "clock stopped" };
    },
    /** Two of the clock's intervals pass without a signal from `watched` (after one for any in flight). */
    async expectStill(watched: () => number) {
      fake.userMessage({
        channelId: general.id,
        author: alice,
        content: `${mention} tick`,
        mentions: [fake.bot],
      });
      await fake.waitFor(() => ticks() >= 2, 30_000, "the clock's first interval");
      const before = watched();
      const start = ticks();
      await fake.waitFor(() => ticks() >= start + 2, 30_000, "two more of the clock's intervals");
      expect(watched()).toBe(before);
      done = true;
      await fake.waitFor(() => world.sentTo(general.id).includes("clock stopped"), 30_000, "the clock's end");
    },
  };
}
