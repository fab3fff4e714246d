import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import {
  PROMPT_RECHECK_MS,
  ContextBuilder,
  RUNTIME_CONTEXT_TAG,
  buildUserContent,
  isRuntimeContextMessage,
} from "../../src/agent/context.js";
import { formatLocalTime } from "../../src/util/time.js";
import { MemoryFiles } from "../../src/agent/memory.js";
import { defaultConfig } from "../../src/config/schema.js";
import type { ChatMessage, ContentPart } from "../../src/llm/types.js";

let root: string;
let workspace: string;
let builtin: string;

beforeEach(async () => {
  root = await mkdtemp(join(tmpdir(), "palaver-context-"));
  workspace = join(root, "ws");
  builtin = join(root, "builtin-skills");
  await mkdir(join(workspace, "memory"), { recursive: true });
  await mkdir(join(builtin, "helper"), { recursive: true });
  await mkdir(join(builtin, "always-on"), { recursive: true });
  await writeFile(join(workspace, "AGENTS.md"), "Always answer in haiku.\n");
  await writeFile(join(workspace, "SOUL.md"), "Calm and kind.");
  await writeFile(join(workspace, "USER.md"), "Name: Ada");
  await writeFile(join(workspace, "IDENTITY.md"), "   \n"); // blank: left out
  await writeFile(join(workspace, "memory", "MEMORY.md"), "- Ada likes tea\n");
  await writeFile(
    join(builtin, "helper", "SKILL.md"),
    "---\ndescription: Helps with things\n---\nhelper body",
  );
  await writeFile(
    join(builtin, "always-on", "SKILL.md"),
    "---\ndescription: Always there\nalways: true\n---\nALWAYS-ON BODY",
  );
});
afterEach(async () => {
  vi.useRealTimers();
  await rm(root, { recursive: true, force: true });
});

const builder = (): ContextBuilder => new ContextBuilder({ workspace, builtinSkillsDir: builtin });

describe("ContextBuilder.buildSystemPrompt", () => {
  it("has the identity, the bootstrap files, memory and skills", async () => {
    const prompt = await builder().buildSystemPrompt();
    expect(prompt.startsWith("# palaver\n")).toBe(true);
    expect(prompt).toContain(`Node.js ${process.version}`);
    expect(prompt).toContain(`Your workspace is ${workspace}`);
    expect(prompt).toContain(join(workspace, "memory", "MEMORY.md"));
    expect(prompt).toContain(join(workspace, "memory", "HISTORY.md"));
    expect(prompt).toContain("## AGENTS.md\n\nAlways answer in haiku.");
    expect(prompt).toContain("## SOUL.md\n\nCalm and kind.");
    expect(prompt).toContain("## USER.md\n\nName: Ada");
    expect(prompt).not.toContain("## TOOLS.md"); // missing file
    expect(prompt).not.toContain("## IDENTITY.md"); // blank file
    expect(prompt).toContain("# Memory\n\n## Long-term Memory\n\n- Ada likes tea");
    expect(prompt).toContain("### Skill: always-on\n\nALWAYS-ON BODY");
    expect(prompt).toContain("<name>helper</name>");
    expect(prompt).toContain(`<location>${join(builtin, "helper", "SKILL.md")}</location>`);
    expect(prompt).toContain("read_file");
    // The always-on skill's body is in the prompt: it is not listed again.
    expect(prompt).not.toContain("<name>always-on</name>");
    // Order: identity, files, memory, active skills, skills list.
    const order = ["# palaver", "## AGENTS.md", "# Memory", "# Active Skills", "# Skills"].map((h) =>
      prompt.indexOf(h),
    );
    expect([...order].sort((a, b) => a - b)).toEqual(order);
  });

  it("uses the configured agent name", async () => {
    const prompt = await new ContextBuilder({ workspace, agentName: "jarvis" }).buildSystemPrompt();
    expect(prompt.startsWith("# jarvis\n\nYou are jarvis")).toBe(true);
  });

  it("has no clock: two builders at different times produce the same bytes", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    vi.setSystemTime(new Date(2026, 0, 5, 8, 17));
    const first = await builder().buildSystemPrompt();
    vi.setSystemTime(new Date(2027, 6, 9, 22, 43));
    const second = await builder().buildSystemPrompt();
    expect(second).toBe(first);
    expect(first).not.toMatch(/2026|2027|08:17|22:43/);
  });

  it("is byte-identical across calls and changes when MEMORY.md changes", async () => {
    const b = builder();
    let now = 1_000_000;
    const later = () => (now += 2 * PROMPT_RECHECK_MS);
    const first = await b.buildSystemPrompt(now);
    expect(await b.buildSystemPrompt(later())).toBe(first);

    await new MemoryFiles(workspace).writeMemory("- Ada moved to Lyon\n");
    // Edited behind its back: seen once the recheck interval has passed, not before.
    expect(await b.buildSystemPrompt(now + 1)).toBe(first);
    const afterMemory = await b.buildSystemPrompt(later());
    expect(afterMemory).not.toBe(first);
    expect(afterMemory).toContain("- Ada moved to Lyon");
    expect(afterMemory).not.toContain("Ada likes tea");

    // Written through the builder's own MemoryFiles (what consolidation uses): seen at once.
    await b.memory.writeMemory("- Ada moved to Paris\n");
    expect(await b.buildSystemPrompt(now + 1)).toContain("- Ada moved to Paris");

    await writeFile(join(workspace, "TOOLS.md"), "Use python3.");
    const afterTools = await b.buildSystemPrompt(later());
    expect(afterTools).toContain("## TOOLS.md\n\nUse python3.");

    await writeFile(join(builtin, "helper", "SKILL.md"), "---\ndescription: Helps with other things\n---\nx");
    expect(await b.buildSystemPrompt(later())).toContain("Helps with other things");
  });

  it("checks the files once for turns that start together, and not at all within the interval", async () => {
    const b = builder();
    const list = vi.spyOn(b.skills, "list");
    const prompts = await Promise.all(Array.from({ length: 20 }, () => b.buildSystemPrompt(1_000_000)));
    expect(new Set(prompts).size).toBe(1);
    expect(list).toHaveBeenCalledTimes(1);
    await b.buildSystemPrompt(1_000_000 + PROMPT_RECHECK_MS - 1);
    expect(list).toHaveBeenCalledTimes(1);
    await Promise.all([
      b.buildSystemPrompt(1_000_000 + PROMPT_RECHECK_MS),
      b.buildSystemPrompt(1_000_000 + PROMPT_RECHECK_MS),
    ]);
    expect(list).toHaveBeenCalledTimes(2);
  });

  it("does not keep a prompt read before its own memory write finished", async () => {
    const b = builder();
    const reading = b.buildSystemPrompt(1_000_000); // in flight: has not read MEMORY.md yet
    await b.memory.writeMemory("- Ada moved to Oslo\n");
    await reading;
    expect(await b.buildSystemPrompt(1_000_001)).toContain("- Ada moved to Oslo");
  });

  it("leaves the memory section out when MEMORY.md is empty", async () => {
    await writeFile(join(workspace, "memory", "MEMORY.md"), "\n\n");
    expect(await builder().buildSystemPrompt()).not.toContain("# Memory");
  });
});

describe("ContextBuilder: prompt size (issue 11)", () => {
  it("puts at most 32,000 characters of a 10 MB MEMORY.md in the prompt, and says where the rest is", async () => {
    const line = "- a fact worth remembering, written again and again\n";
    const big = line.repeat(Math.ceil((10 * 1024 * 1024) / line.length));
    await writeFile(join(workspace, "memory", "MEMORY.md"), big);
    const prompt = await builder().buildSystemPrompt();
    const memory = prompt.slice(prompt.indexOf("## Long-term Memory"));
    expect(memory).toContain(big.slice(0, 1000));
    expect(memory).toContain(
      `[truncated: 32000 characters of ${Buffer.byteLength(big)} bytes shown; ` +
        `the full file is at ${join("memory", "MEMORY.md")}, read it with read_file]`,
    );
    // The identity, the other files and the skills still fit around it.
    expect(prompt.length).toBeLessThan(32_000 + 20_000);
    expect(prompt).toContain("## AGENTS.md\n\nAlways answer in haiku.");
    expect(prompt).toContain("# Active Skills");
  });

  it("caps each bootstrap file at promptFileMaxChars, counting characters exactly when it read the whole file", async () => {
    const agents = `${"é".repeat(150)}\n`; // multi-byte: characters, not bytes, are counted
    await writeFile(join(workspace, "AGENTS.md"), agents);
    await writeFile(join(workspace, "SOUL.md"), "short soul");
    const prompt = await new ContextBuilder({
      workspace,
      builtinSkillsDir: builtin,
      promptFileMaxChars: 100,
    }).buildSystemPrompt();
    expect(prompt).toContain(
      `## AGENTS.md\n\n${"é".repeat(100)}\n\n[truncated: 100 characters of 150 characters shown; ` +
        "the full file is at AGENTS.md, read it with read_file]",
    );
    expect(prompt).toContain("## SOUL.md\n\nshort soul\n");
    expect(prompt).not.toContain("é".repeat(101));
  });

  it("reads the limit from agents.defaults.promptFileMaxChars (default 32,000)", () => {
    expect(defaultConfig().agents.defaults.promptFileMaxChars).toBe(32_000);
    expect(builder().promptFileMaxChars).toBe(32_000);
  });
});

describe("ContextBuilder.buildMessages", () => {
  const history: ChatMessage[] = [
    { role: "user", content: "earlier" },
    { role: "assistant", content: "reply" },
  ];

  it("returns system, history, runtime context, then the user message", async () => {
    const b = builder();
    const now = new Date(2026, 10, 22, 10, 0);
    const messages = await b.buildMessages({
      history,
      content: "hello",
      channel: "telegram",
      chatId: "123",
      now,
    });
    expect(messages).toHaveLength(5);
    expect(messages[0]).toEqual({ role: "system", content: await b.buildSystemPrompt() });
    expect(messages.slice(1, 3)).toEqual(history);
    const runtime = messages[3]!;
    expect(runtime.role).toBe("user");
    expect(runtime.content).toBe(
      `${RUNTIME_CONTEXT_TAG}\nCurrent time: ${formatLocalTime(now)}\nChannel: telegram\nChat ID: 123`,
    );
    expect(isRuntimeContextMessage(runtime)).toBe(true);
    expect(messages[4]).toEqual({ role: "user", content: "hello" });
    expect(messages.filter(isRuntimeContextMessage)).toEqual([runtime]);
  });

  it("drops a runtime context message found in the history", async () => {
    const stale: ChatMessage = { role: "user", content: `${RUNTIME_CONTEXT_TAG}\nCurrent time: old` };
    const messages = await builder().buildMessages({
      history: [...history, stale],
      content: "hi",
      channel: "cli",
      chatId: "direct",
    });
    expect(messages.filter(isRuntimeContextMessage)).toHaveLength(1);
    expect(messages.map((m) => m.content)).not.toContain(stale.content);
  });

  it("turns image media into image parts and names other files in the text", async () => {
    const png = Buffer.from("89504e470d0a1a0a0000000d49484452", "hex");
    const jpg = Buffer.from([0xff, 0xd8, 0xff, 0xe0, 1, 2, 3]);
    await writeFile(join(root, "photo.PNG"), png);
    await writeFile(join(root, "pic.jpeg"), jpg);
    await writeFile(join(root, "report.pdf"), "%PDF-1.4");
    const media = [join(root, "photo.PNG"), join(root, "report.pdf"), join(root, "pic.jpeg")];
    const messages = await builder().buildMessages({
      history: [],
      content: "what is this?",
      media,
      channel: "telegram",
      chatId: "1",
    });
    const content = messages.at(-1)!.content as ContentPart[];
    expect(content).toEqual([
      { type: "image_url", image_url: { url: `data:image/png;base64,${png.toString("base64")}` } },
      { type: "image_url", image_url: { url: `data:image/jpeg;base64,${jpg.toString("base64")}` } },
      { type: "text", text: `what is this?\n\n[Attached file: ${join(root, "report.pdf")}]` },
    ]);
  });
});

describe("buildUserContent", () => {
  it("keeps plain text when there are no images", async () => {
    expect(await buildUserContent("hi", [])).toBe("hi");
    expect(await buildUserContent("", ["/x/a.txt"])).toBe("[Attached file: /x/a.txt]");
  });

  it("names images that are too large or unreadable instead of inlining them", async () => {
    await writeFile(join(root, "big.png"), Buffer.alloc(64, 1));
    const missing = join(root, "gone.webp");
    const content = await buildUserContent("look", [join(root, "big.png"), missing], 32);
    expect(content).toBe(`look\n\n[Attached file: ${join(root, "big.png")}]\n[Attached file: ${missing}]`);
  });
});

describe("runtime context", () => {
  it("formats local time with weekday and UTC offset", () => {
    expect(formatLocalTime(new Date(2026, 10, 22, 10, 0))).toMatch(
      /^2026-11-22 10:00 \(Sunday\) UTC[+-]\d{2}:\d{2}$/,
    );
  });

  it("recognises only the runtime context message", () => {
    expect(isRuntimeContextMessage({ role: "user", content: `${RUNTIME_CONTEXT_TAG}\nx` })).toBe(true);
    expect(isRuntimeContextMessage({ role: "user", content: `hello ${RUNTIME_CONTEXT_TAG}` })).toBe(false);
    expect(isRuntimeContextMessage({ role: "assistant", content: RUNTIME_CONTEXT_TAG })).toBe(false);
    expect(
      isRuntimeContextMessage({ role: "user", content: [{ type: "text", text: RUNTIME_CONTEXT_TAG }] }),
    ).toBe(false);
  });
});
