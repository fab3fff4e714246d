/**
 * The web chat in a real browser: Debian's Chromium driven by playwright-core, against the real
 * `palaver gateway` child process (web channel on) and the streaming fake LLM. One gateway for
 * the file; each test opens a fresh browser context and starts a new chat.
 *
 * Skipped, with the reason printed, when Chromium is not installed (`apt-get install chromium`);
 * in CI that fails instead (.ci/run installs it). Screenshots at desktop and phone width go to test-results/web/; with
 * PALAVER_UPDATE_SCREENSHOT=1 the desktop one also replaces docs/web-chat.png (the README's).
 */
import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import { copyFile, mkdir, writeFile } from "node:fs/promises";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { chromium, type Browser, type BrowserContext, type Page } from "playwright-core";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { lastUserText, toolCall, type FakeReply, type RecordedRequest } from "../fakes/openai-server.js";
import { ROOT, type RunningCli } from "../helpers/cli.js";
import { GatewayHarness, writeGatewayConfig } from "../helpers/gateway-process.js";
import { requireOrSkip } from "../helpers/requires.js";
import { MIN_WAIT_MS, waitFor } from "../helpers/wait.js";
import { ensureWebBuilt } from "./build.js";

/** PALAVER_CHROMIUM, else a Chromium or Chrome on PATH (Debian, Ubuntu, Google's), else playwright's own download. */
function findChromium(): { path?: string; missing: string } {
  const given = process.env.PALAVER_CHROMIUM;
  if (given)
    return existsSync(given)
      ? { path: given, missing: "" }
      : { missing: `the web chat's browser tests need Chromium: PALAVER_CHROMIUM=${given} does not exist` };
  for (const name of ["chromium", "chromium-browser", "google-chrome-stable", "google-chrome"]) {
    const found = spawnSync("sh", ["-c", 'command -v "$0"', name], { encoding: "utf8" }).stdout.trim();
    if (found) return { path: found, missing: "" };
  }
  const own = chromium.executablePath();
  if (own && existsSync(own)) return { path: own, missing: "" };
  return {
    missing:
      "the web chat's browser tests need Chromium: none on PATH (chromium, chromium-browser, " +
      "google-chrome) nor playwright's (apt-get install chromium, or set PALAVER_CHROMIUM to its path)",
  };
}
const CHROMIUM = findChromium();
const NO_CHROMIUM = requireOrSkip(CHROMIUM.missing);

const ARTIFACTS = join(ROOT, "test-results", "web");
/** expect.poll with the suite's patience (its default second is nothing on a busy machine). */
const poll = <T>(fn: () => T | Promise<T>) => expect.poll(fn, { timeout: MIN_WAIT_MS });
const DESKTOP = { width: 1280, height: 800 };
const PHONE = { width: 375, height: 740 };

/** Streams in about 150 pieces, a few ms apart: long enough to be seen growing. */
const STREAMED =
  "Use **console.log**:\n\n```js\nconsole.log('Hello, world!');\n```\n\n" +
  "In a browser it writes to the developer console; in Node, to standard output.\n\n" +
  "1. `console.error` writes to standard error.\n2. `console.table` shows arrays as a table.\n\nThat is all.";
const SLOW = "This answer takes its time: ".padEnd(400, "word ");
/** One line of code, long enough to reach the Copy button at phone width. */
const ONE_LINE_CODE = "```sh\nnpx palaver gateway --verbose --config ~/.palaver/config.json\n```";
/** Every way an answer could try to run something or make the page load something. */
const xssAnswer = (watched: string) =>
  [
    "XSS-START <script>alert('script')</script>",
    "<img src=x onerror=\"alert('img')\">",
    "[click me](javascript:alert('link'))",
    `<img src="${watched}/raw.png">`,
    `![pixel](${watched}/markdown.png)`,
    "XSS-END",
  ].join("\n\n");

let watchedUrl = "";

interface DOMRectLike {
  left: number;
  right: number;
  top: number;
  bottom: number;
}

/** The fake LLM's answers, chosen by the user's words (each test has its own). */
function reply(req: RecordedRequest): FakeReply {
  const last = req.body.messages.at(-1);
  const text = lastUserText(req);
  if (text.includes("run the command")) {
    return last?.role === "tool"
      ? { content: "Ran it." }
      : { toolCalls: [toolCall("exec", { command: "touch approved-by-page" })] };
  }
  if (text.includes("check the date")) {
    return last?.role === "tool"
      ? { content: "The command has run; the answer continues below the question." }
      : { toolCalls: [toolCall("exec", { command: "echo checked" })] };
  }
  if (text.includes("send me the report")) {
    return last?.role === "tool"
      ? { content: "Sent." }
      : { toolCalls: [toolCall("message", { content: "Here is the report.", media: ["report.txt"] })] };
  }
  if (text.includes("plan please")) {
    // One plan step per call: two items worked through, then the answer.
    const step = req.body.messages.filter((m) => m.role === "tool").length;
    if (step === 3) return { content: "Planned and done." };
    const items = ["Look around", "Write it up"].map((item, i) => ({
      text: item,
      status: i < step ? "done" : i === step ? "in_progress" : "pending",
    }));
    return { toolCalls: [toolCall("todo_write", { items })] };
  }
  if (text.includes("stream please")) return { content: STREAMED, pieceChars: 2, pieceDelayMs: 15 };
  if (text.includes("slow please")) return { content: SLOW, pieceChars: 4, pieceDelayMs: 100 };
  if (text.includes("attack please")) return { content: xssAnswer(watchedUrl) };
  if (text.includes("[Attached file:")) return { content: "Got your file." };
  if (text.includes("one line of code")) return { content: ONE_LINE_CODE };
  if (text.includes("count this"))
    return { content: "Counted.", usage: { prompt_tokens: 1234, completion_tokens: 56 } };
  return { content: `You said: ${text}` };
}

/** The `…/#token=…` address the gateway prints at start, from its stdout or its log. */
async function chatUrlOf(run: RunningCli, harness: GatewayHarness): Promise<string> {
  const find = () => /(http:\/\/[^\s"'/]+\/#token=[A-Za-z0-9_-]+)/.exec(run.stdout + run.stderr)?.[1];
  await Promise.race([
    waitFor(() => find() !== undefined, harness.startupMs, "the chat address in the gateway's output"),
    run.exited.then((code) => {
      throw new Error(`the gateway exited (${code}):\n${run.stderr}`);
    }),
  ]);
  return find()!;
}

describe.skipIf(NO_CHROMIUM)("the web chat in Chromium", () => {
  const harness = new GatewayHarness({ prefix: "palaver-web-browser-", telegram: false });
  let browser: Browser;
  let chatUrl = "";
  let watched: Server;
  const watchedHits: string[] = [];
  let context: BrowserContext | undefined;

  beforeAll(async () => {
    ensureWebBuilt();
    await mkdir(ARTIFACTS, { recursive: true });
    watched = createServer((req, res) => {
      watchedHits.push(req.url ?? "");
      res.end();
    });
    await new Promise<void>((resolve) => watched.listen(0, "127.0.0.1", resolve));
    watchedUrl = `http://127.0.0.1:${(watched.address() as AddressInfo).port}`;
    await harness.start();
    harness.llm.setHandler(reply);
    const configPath = await writeGatewayConfig(
      harness.dir,
      { llmBaseURL: harness.llm.baseURL },
      {
        channels: { web: { enabled: true }, streaming: true, sendProgress: true, sendToolHints: true },
        // exec asks (and only exec): the approval test answers with the page's button.
        tools: {
          approval: { mode: "off", rules: [{ tool: "exec", action: "ask" }] },
          exec: { sandbox: "off" },
        },
        // $1000 / $2000 per million: the usage panel's test has a cost in whole cents.
        pricing: { "fake-*": { input: 1000, output: 2000 } },
      },
    );
    chatUrl = await chatUrlOf(harness.spawnGateway({ configPath }), harness);
    browser = await chromium.launch({ executablePath: CHROMIUM.path });
  });

  afterEach(async () => {
    await context?.close();
    context = undefined;
    const problems = pageProblems;
    pageProblems = [];
    expect(problems).toEqual([]);
  });

  afterAll(async () => {
    await browser?.close();
    await harness.close();
    await new Promise<void>((resolve) => watched?.close(() => resolve()));
  });

  /** Uncaught errors and Content-Security-Policy refusals of any page: none in any test. */
  let pageProblems: string[] = [];

  async function openPage(viewport = DESKTOP): Promise<Page> {
    context = await browser.newContext({ viewport });
    context.on("page", watch);
    return context.newPage();
  }

  function watch(page: Page): void {
    page.on("pageerror", (err) => pageProblems.push(`uncaught: ${err.message}`));
    page.on("console", (msg) => {
      if (msg.type() === "error" && /Content.Security.Policy/i.test(msg.text()))
        pageProblems.push(msg.text());
    });
  }

  /**
   * Opens the printed address and starts a new chat, so each test has its own conversation (the
   * first test gets the one the page made itself, there being none).
   */
  async function openChat(viewport = DESKTOP): Promise<Page> {
    const page = await openPage(viewport);
    await page.goto(chatUrl);
    const current = page.locator('#conversations a[aria-current="page"]');
    await current.waitFor();
    const links = page.locator("#conversations a");
    if ((await links.count()) > 1 || !(await current.textContent())?.startsWith("New chat")) {
      const before = await current.getAttribute("href");
      await page.locator("#new-chat").click();
      await poll(() => current.getAttribute("href")).not.toBe(before);
    }
    await poll(() => page.locator("#transcript article").count()).toBe(0);
    return page;
  }

  async function send(page: Page, text: string): Promise<void> {
    await page.locator("#input").fill(text);
    await page.locator("#input").press("Enter");
  }

  const lastAnswer = (page: Page) => page.locator("#transcript article.assistant").last();

  it("sends with Enter, shows the answer growing as it streams, then the final; the token leaves the address", async () => {
    const page = await openChat();
    expect(page.url()).not.toContain("token");
    // Every length the streaming answer's text had, recorded in the page as it changes.
    // (Strings, not functions: these run in the page, and the tests are typed without the DOM.)
    await page.evaluate(`{
      window.seen = [];
      new MutationObserver(() => {
        const el = document.querySelector("#transcript article.assistant.streaming .body");
        if (el) window.seen.push(el.textContent.length);
      }).observe(document.getElementById("transcript"), { subtree: true, childList: true, characterData: true });
    }`);
    // Shift+Enter breaks the line instead of sending.
    await page.locator("#input").fill("How do I print something in JavaScript?");
    await page.locator("#input").press("Shift+Enter");
    await poll(() => page.locator("#input").inputValue()).toBe("How do I print something in JavaScript?\n");
    await page.locator("#input").pressSequentially("Short answer, stream please.");
    await page.locator("#input").press("Enter");
    await poll(() => page.locator("#input").inputValue()).toBe("");
    await page.locator("#transcript article.user", { hasText: "Short answer" }).waitFor();
    await page.locator("#stop").waitFor({ state: "visible" });

    const answer = lastAnswer(page);
    await answer.locator("text=That is all.").waitFor();
    await poll(() => answer.getAttribute("aria-busy")).toBeNull();
    await page.locator("#stop").waitFor({ state: "hidden" });
    const seen = await page.evaluate<number[]>("window.seen");
    const full = (await answer.locator(".body").textContent())!.length;
    const partial = new Set(seen.filter((n) => n > 0 && n < full - 20));
    expect(partial.size, `lengths seen while streaming: ${seen.join(",")}`).toBeGreaterThanOrEqual(2);
    // Markdown rendered, with a copy button on the code block.
    await poll(() => answer.locator("strong").textContent()).toBe("console.log");
    await poll(() => answer.locator(".code pre").textContent()).toContain("console.log('Hello, world!');");
    await poll(() => answer.locator(".code button.copy").count()).toBe(1);

    await page.screenshot({ path: join(ARTIFACTS, "desktop.png") });
    if (process.env.PALAVER_UPDATE_SCREENSHOT === "1") {
      await copyFile(join(ARTIFACTS, "desktop.png"), join(ROOT, "docs", "web-chat.png"));
    }
    await page.setViewportSize(PHONE);
    await page.screenshot({ path: join(ARTIFACTS, "phone.png") });
    await page.emulateMedia({ colorScheme: "dark" });
    await page.screenshot({ path: join(ARTIFACTS, "phone-dark.png") });
    // Usable at phone width: nothing wider than the screen, the box and the list reachable.
    expect(await page.evaluate<number>("document.documentElement.scrollWidth")).toBeLessThanOrEqual(
      PHONE.width,
    );
    await page.locator("#input").waitFor({ state: "visible" });
    await page.locator("#menu").click();
    await page.locator("#sidebar").waitFor({ state: "visible" });
    await page.screenshot({ path: join(ARTIFACTS, "phone-conversations.png") });
  });

  it("the plan is one checklist in the answer, rewritten in place until every item is done", async () => {
    const page = await openChat();
    // Every text the plan block had, and how many blocks there were, recorded as the page changes.
    await page.evaluate(`{
      window.plans = [];
      new MutationObserver(() => {
        const blocks = document.querySelectorAll("#transcript ul.plan:not([hidden])");
        if (blocks.length) window.plans.push(blocks.length + ":" + blocks[0].textContent);
      }).observe(document.getElementById("transcript"), { subtree: true, childList: true, characterData: true });
    }`);
    await send(page, "plan please");
    const answer = page.locator("#transcript article.assistant", { hasText: "Planned and done." });
    await answer.waitFor();
    const plan = answer.locator("ul.plan");
    await poll(() => plan.locator("li.done").count()).toBe(2);
    const seen = await page.evaluate<string[]>("window.plans");
    expect(seen[0]).toBe("1:▶ Look around☐ Write it up");
    expect(seen.at(-1)).toBe("1:☑ Look around☑ Write it up");
    expect(seen.every((s) => s.startsWith("1:"))).toBe(true);
    expect(await plan.locator("li").allTextContents()).toEqual(["☑ Look around", "☑ Write it up"]);
    expect(await page.locator("#transcript ul.plan").count()).toBe(1);
    expect(await plan.getAttribute("aria-label")).toBe("Plan");
  });

  it("Stop during a slow answer ends the turn; the partial answer stays, marked stopped", async () => {
    const page = await openChat();
    await send(page, "slow please");
    // Not the last answer for long: /stop is answered with a reply of its own.
    const answer = page.locator("#transcript article.assistant", { hasText: "takes its time" });
    await answer.waitFor();
    await page.locator("#stop").click();
    await answer.locator(".outcome", { hasText: "stopped" }).waitFor();
    await page.locator("#stop").waitFor({ state: "hidden" });
    expect(await answer.locator(".body").textContent()).toContain("This answer takes its time");
    expect((await answer.locator(".body").textContent())!.length).toBeLessThan(SLOW.trim().length);
  });

  it("a reload shows the conversation's history", async () => {
    const page = await openChat();
    await send(page, "remember me");
    await lastAnswer(page).locator("text=You said: remember me").waitFor();
    const hash = new URL(page.url()).hash;
    await page.reload();
    await page.locator("#transcript article.user", { hasText: "remember me" }).waitFor();
    await lastAnswer(page).locator("text=You said: remember me").waitFor();
    expect(new URL(page.url()).hash).toBe(hash);
    expect(await page.locator("#transcript article").count()).toBe(2);
  });

  it("an answer full of HTML and javascript: links runs nothing, loads nothing, and shows as text", async () => {
    const page = await openChat();
    const dialogs: string[] = [];
    const requests: string[] = [];
    page.on("dialog", (d) => {
      dialogs.push(d.message());
      void d.dismiss();
    });
    page.on("request", (r) => requests.push(r.url()));
    await send(page, "attack please <img src=x onerror=\"alert('user')\">");
    const answer = lastAnswer(page);
    await answer.locator("text=XSS-END").waitFor();
    const text = (await answer.locator(".body").textContent())!;
    expect(text).toContain("<script>alert('script')</script>");
    expect(text).toContain("<img src=x onerror=\"alert('img')\">");
    expect(text).toContain("click me");
    expect(await page.locator("#transcript img, #transcript script").count()).toBe(0);
    expect(await page.locator('#transcript a[href^="javascript"]').count()).toBe(0);
    await answer.locator("text=click me").click();
    // The user's own text is text too.
    await page.locator("#transcript article.user", { hasText: "onerror" }).waitFor();
    // A round trip through the page after all that: anything it started has been seen by now.
    await page.evaluate(`fetch("/api/me").then((r) => r.status)`);
    expect(dialogs).toEqual([]);
    expect(requests.filter((u) => u.startsWith(watchedUrl) || u.endsWith("/x"))).toEqual([]);
    expect(watchedHits).toEqual([]);
  });

  it("without the token, or with a wrong one, the page says where to find it", async () => {
    const base = chatUrl.slice(0, chatUrl.indexOf("#"));
    const page = await openPage();
    await page.goto(base);
    await page.locator("#unauthorized").waitFor({ state: "visible" });
    expect(await page.locator("#app").isHidden()).toBe(true);
    expect(await page.locator("#unauthorized").textContent()).toContain("web/token");

    await page.goto(`${base}#token=not-the-token`);
    await page.reload(); // a fragment change alone does not load the page again
    await page.locator("#unauthorized").waitFor({ state: "visible" });
    expect(page.url()).not.toContain("not-the-token");
  });

  it("an uploaded file reaches the model as an attachment", async () => {
    const page = await openChat();
    await page.locator("#files").setInputFiles({
      name: "notes.txt",
      mimeType: "text/plain",
      buffer: Buffer.from("the notes"),
    });
    const chip = page.locator("#attachments .chip", { hasText: "notes.txt" });
    await chip.locator(".status", { hasNotText: "uploading" }).waitFor();
    const before = harness.llm.requests.length;
    await send(page, "read this");
    await lastAnswer(page).locator("text=Got your file.").waitFor();
    const asked = harness.llm.requests.slice(before).map(lastUserText);
    expect(asked.some((t) => t.includes("read this") && /\[Attached file: [^\]]*notes[^\]]*\]/.test(t))).toBe(
      true,
    );
    await page.locator("#transcript article.user .files", { hasText: "notes.txt" }).waitFor();
  });

  it("a file the agent sends is a download link that gives the file", async () => {
    await writeFile(join(harness.dir, "ws", "report.txt"), "the report's text\n");
    const page = await openChat();
    await send(page, "send me the report");
    const link = page
      .locator("#transcript article.assistant", { hasText: "Here is the report." })
      .locator("a[download]", { hasText: "report.txt" });
    await link.waitFor();
    const href = (await link.getAttribute("href"))!;
    expect(href).toMatch(/^\/api\/files\//);
    // Fetched as the page would (with its cookie), not through the download dialog.
    expect(await page.evaluate<string>(`fetch(${JSON.stringify(href)}).then((r) => r.text())`)).toBe(
      "the report's text\n",
    );
  });

  it("an approval is answered with the page's button, and the command runs", async () => {
    const page = await openChat();
    await send(page, "run the command");
    const question = page.locator("#transcript article.question");
    await question.locator("button.choice").first().waitFor();
    await page.screenshot({ path: join(ARTIFACTS, "approval.png") });
    await question.locator('button[data-choice="approve"]').click();
    await lastAnswer(page).locator("text=Ran it.").waitFor();
    await poll(() => question.locator("button").count()).toBe(0);
    await waitFor(
      () => existsSync(join(harness.dir, "ws", "approved-by-page")),
      undefined,
      "the command ran",
    );
  });

  it("a decided approval stays where it was asked; the answer continues below it", async () => {
    const page = await openChat();
    await send(page, "check the date");
    const question = page.locator("#transcript article.question");
    await question.locator('button[data-choice="approve"]').click();
    await lastAnswer(page).locator("text=the answer continues below").waitFor();
    await question.locator("button").first().waitFor({ state: "detached" });
    await poll(() => question.getAttribute("class")).toContain("closed");
    // The transcript in order: each article's kind, and whether it is the card or holds the answer.
    const order = await page.evaluate<string[]>(`
      Array.from(document.querySelectorAll("#transcript article")).map((a) =>
        a.classList.contains("question") ? "question"
          : a.textContent.includes("the answer continues below") ? "answer"
          : a.classList.contains("user") ? "user" : "other")
    `);
    expect(order.filter((kind) => kind !== "other")).toEqual(["user", "question", "answer"]);
  });

  it("has a favicon the page's own policy lets the browser show, and nothing is missing", async () => {
    const page = await openPage();
    const missing: string[] = [];
    const consoleErrors: string[] = [];
    page.on("response", (r) => {
      if (r.status() >= 400) missing.push(`${r.status()} ${r.url()}`);
    });
    page.on("console", (msg) => {
      if (msg.type() === "error") consoleErrors.push(msg.text());
    });
    await page.goto(chatUrl);
    await page.locator("#app").waitFor({ state: "visible" });
    const href = await page.evaluate<string | null>(
      `document.querySelector('link[rel~="icon"]')?.getAttribute("href") ?? null`,
    );
    expect(href, "a <link rel=icon> in the page").toBeTruthy();
    // Loaded as the browser loads the icon: an image under the page's Content-Security-Policy.
    const icon = await page.evaluate<{ type: string; width: number }>(`new Promise((resolve) => {
      const href = document.querySelector('link[rel~="icon"]').href;
      const img = new Image();
      img.onload = () => resolve({ type: href.startsWith("data:") ? href.slice(5, href.indexOf(",")) : "", width: img.naturalWidth });
      img.onerror = () => resolve({ type: "", width: 0 });
      img.src = href;
    })`);
    expect(icon.width).toBeGreaterThan(0);
    if (href!.startsWith("data:")) expect(icon.type).toMatch(/^image\//);
    else {
      const served = await page.evaluate<{ status: number; type: string }>(
        `fetch(${JSON.stringify(href)}).then((r) => ({ status: r.status, type: r.headers.get("content-type") ?? "" }))`,
      );
      expect(served.status).toBe(200);
      expect(served.type).toMatch(/^image\//);
    }
    // A round trip after the load: a favicon request the browser made on its own has been answered by now.
    await page.evaluate(`fetch("/api/me").then((r) => r.status)`);
    expect(missing).toEqual([]);
    expect(consoleErrors).toEqual([]);
  });

  it("the Copy button never covers a one-line code block on a phone", async () => {
    const page = await openChat();
    // Phone width after opening: the conversation list (which openChat uses) is folded away there.
    await page.setViewportSize(PHONE);
    await send(page, "one line of code please");
    const answer = lastAnswer(page);
    await answer.locator(".code button.copy").waitFor();
    // Measured once the answer is final: while it streams, the block may hold part of the line.
    await poll(() => answer.getAttribute("aria-busy")).toBeNull();
    // Where the code's text may run (the pre's content box, as wide as the screen allows) and the button.
    const box = await page.evaluate<{ textRight: number; pre: DOMRectLike; button: DOMRectLike }>(`(() => {
      const el = Array.from(document.querySelectorAll("#transcript article.assistant .code")).at(-1);
      const pre = el.querySelector("pre");
      const r = pre.getBoundingClientRect();
      const style = getComputedStyle(pre);
      const b = el.querySelector("button.copy").getBoundingClientRect();
      return {
        textRight: r.right - parseFloat(style.paddingRight) - parseFloat(style.borderRightWidth),
        pre: { left: r.left, right: r.right, top: r.top, bottom: r.bottom },
        button: { left: b.left, right: b.right, top: b.top, bottom: b.bottom },
      };
    })()`);
    // The button sits on the block (so the check below means something) ...
    expect(box.button.top).toBeGreaterThanOrEqual(box.pre.top);
    expect(box.button.right).toBeLessThanOrEqual(box.pre.right);
    expect(box.button.top).toBeLessThan(box.pre.bottom);
    // ... and the text's area ends before it starts.
    expect(box.textRight).toBeLessThanOrEqual(box.button.left);
    // The line is long enough to scroll under that area, not to stop short of the button by luck.
    const overflow = await page.evaluate<boolean>(`(() => {
      const pre = Array.from(document.querySelectorAll("#transcript article.assistant .code pre")).at(-1);
      return pre.scrollWidth > pre.clientWidth;
    })()`);
    expect(overflow).toBe(true);
  });

  it("two tabs on one conversation both see the reply", async () => {
    const page = await openChat();
    const other = await context!.newPage();
    await other.goto(page.url());
    await other.locator("#app").waitFor({ state: "visible" });
    await send(page, "both tabs");
    for (const p of [page, other]) {
      await p.locator("#transcript article.user", { hasText: "both tabs" }).waitFor();
      await lastAnswer(p).locator("text=You said: both tabs").waitFor();
    }
    expect(await other.locator("#transcript article.user").count()).toBe(1);
  });

  it("the Usage button opens a panel with this conversation's tokens and cost, as /usage says them", async () => {
    const page = await openChat();
    await send(page, "count this");
    await lastAnswer(page).locator("text=Counted.").waitFor();
    await page.locator("#usage-open").click();
    const panel = page.locator("#usage");
    await panel.waitFor({ state: "visible" });
    // 1234 in at $1000 and 56 out at $2000 per million: $1.234 + $0.112.
    const today = panel.locator("dt", { hasText: "Today" }).locator("xpath=following-sibling::dd[1]");
    await poll(() => today.textContent()).toBe("1 call, 1234 tokens in, 56 out, $1.35");
    // The page's sender is the owner (channels.web.allowFrom's default): the whole bot is shown too.
    await panel.locator("h3", { hasText: "Whole bot this month" }).waitFor();
    await page.screenshot({ path: join(ARTIFACTS, "usage.png") });
    await panel.locator("button.usage-close").click();
    await panel.waitFor({ state: "hidden" });
  });
});
