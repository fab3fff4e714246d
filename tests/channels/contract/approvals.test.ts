/**
 * Approvals and ask_human end to end on every platform: a Gateway (agent, channel manager, question
 * desk) with the real adapter against the loopback fake of its API, and the model (FakeOpenAI) asking
 * for `exec rm -rf build`. What the person sees and presses goes through the platform's real wire
 * format (Telegram callback queries, Slack block_actions, Discord component interactions).
 */
import { mkdir, mkdtemp, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { Gateway } from "../../../src/gateway.js";
import { FakeOpenAI, toolCall, type FakeMessage, type RecordedRequest } from "../../fakes/openai-server.js";
import { waitFor } from "../../helpers/wait.js";
import type { PlatformRig } from "./driver.js";
import { DRIVERS } from "./drivers.js";
import { startRigGateway } from "./gateway.js";

/** The tool messages the model was shown in a request. */
function toolResults(req: RecordedRequest | undefined): FakeMessage[] {
  return (req?.body.messages ?? []).filter((m) => m.role === "tool");
}

async function exists(path: string): Promise<boolean> {
  return stat(path).then(
    () => true,
    () => false,
  );
}

describe.each(DRIVERS)("approvals in the chat: $name", (driver) => {
  let dir: string;
  let workspace: string;
  let rig: PlatformRig;
  let fake: FakeOpenAI;
  let gateway: Gateway;

  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), `palaver-approvals-${driver.name}-`));
    workspace = join(dir, "ws");
    await mkdir(join(workspace, "build"), { recursive: true });
    await mkdir(join(workspace, "dist"), { recursive: true });
    rig = await driver.create({ workspace: join(dir, "downloads") });
    fake = await FakeOpenAI.start();
  });

  afterEach(async () => {
    await gateway.stop(1000);
    await rig.close();
    await fake.close();
    await rm(dir, { recursive: true, force: true });
  });

  async function startGateway(approval: Record<string, unknown> = {}): Promise<void> {
    const configPath = join(dir, "config.json");
    gateway = await startRigGateway({ driver, rig, llm: fake, workspace, configPath, tools: { approval } });
  }

  /** The model runs `commands` (one tool call each, all in one reply), then repeats what the tools said. */
  function modelRuns(...commands: string[]): void {
    fake.setHandler((req) => {
      const last = req.body.messages.at(-1);
      if (last?.role === "tool")
        return {
          content: `tools said: ${toolResults(req)
            .map((m) => String(m.content))
            .join(" | ")}`,
        };
      return { toolCalls: commands.map((command) => toolCall("exec", { command })) };
    });
  }

  /** The last text the bot posted (after edits) that contains `part`. */
  function shown(part: string): string | undefined {
    return rig.currentTexts().findLast((t) => t.includes(part));
  }

  async function promptShown(): Promise<void> {
    await waitFor(() => rig.buttons().includes("Approve"), undefined, "the approval prompt with its buttons");
  }

  it("asks before `rm -rf build`; Approve runs it and the model sees the result", async () => {
    await startGateway();
    modelRuns("rm -rf build");
    await rig.userSends(rig.allowedSender, "clean the build folder");
    await promptShown();
    expect(rig.buttons()).toEqual(["Approve", "Deny", "Always allow this in this chat"]);
    expect(shown("rm -rf build")).toBeDefined();
    expect(await exists(join(workspace, "build"))).toBe(true); // paused at the call

    expect(await rig.press(rig.allowedSender, "Approve")).toMatch(/approved/i);
    await waitFor(
      () => rig.currentTexts().some((t) => t.startsWith("tools said:")),
      undefined,
      "the final answer",
    );
    expect(await exists(join(workspace, "build"))).toBe(false);
    expect(rig.buttons()).toEqual([]);
    expect(shown("rm -rf build")).toMatch(/approved/i);
    const results = toolResults(fake.requests.at(-1));
    expect(results).toHaveLength(1);
    expect(String(results[0]!.content)).not.toMatch(/denied|not approved/i);
  });

  it("Deny: the command does not run and the model is told it was denied", async () => {
    await startGateway();
    modelRuns("rm -rf build");
    await rig.userSends(rig.allowedSender, "clean the build folder");
    await promptShown();
    await rig.press(rig.allowedSender, "Deny");
    await waitFor(
      () => rig.currentTexts().some((t) => t.startsWith("tools said:")),
      undefined,
      "the final answer",
    );
    expect(await exists(join(workspace, "build"))).toBe(true);
    expect(String(toolResults(fake.requests.at(-1))[0]!.content)).toMatch(/denied by the user/i);
    expect(shown("rm -rf build")).toMatch(/denied/i);
  });

  it("a stranger's press is refused and the prompt stays open for the person who asked", async () => {
    await startGateway();
    modelRuns("rm -rf build");
    await rig.userSends(rig.allowedSender, "clean the build folder");
    await promptShown();
    expect(await rig.press(rig.strangerSender, "Approve")).toMatch(/not allowed/i);
    expect(rig.buttons()).toEqual(["Approve", "Deny", "Always allow this in this chat"]);
    expect(await exists(join(workspace, "build"))).toBe(true);
    await rig.press(rig.allowedSender, "Approve");
    await waitFor(
      () => rig.currentTexts().some((t) => t.startsWith("tools said:")),
      undefined,
      "the final answer",
    );
    expect(await exists(join(workspace, "build"))).toBe(false);
  });

  it("two calls in one reply are asked one by one; one approved, one denied, both get a result", async () => {
    await startGateway();
    modelRuns("rm -rf build", "rm -rf dist");
    await rig.userSends(rig.allowedSender, "clean both");
    await promptShown();
    expect(shown("rm -rf build")).toBeDefined();
    await rig.press(rig.allowedSender, "Approve");
    await waitFor(
      () => shown("rm -rf dist") !== undefined && rig.buttons().includes("Deny"),
      undefined,
      "2nd prompt",
    );
    await rig.press(rig.allowedSender, "Deny");
    await waitFor(
      () => rig.currentTexts().some((t) => t.startsWith("tools said:")),
      undefined,
      "the final answer",
    );
    expect(await exists(join(workspace, "build"))).toBe(false);
    expect(await exists(join(workspace, "dist"))).toBe(true);
    const results = toolResults(fake.requests.at(-1)).map((m) => String(m.content));
    expect(results).toHaveLength(2);
    expect(results[0]).not.toMatch(/denied/i);
    expect(results[1]).toMatch(/denied by the user/i);
  });

  it('"Always allow this in this chat" runs it, and the next `rm` in this chat is not asked', async () => {
    await startGateway();
    modelRuns("rm -rf build");
    await rig.userSends(rig.allowedSender, "clean the build folder");
    await promptShown();
    await rig.press(rig.allowedSender, "Always allow this in this chat");
    await waitFor(
      () => rig.currentTexts().some((t) => t.startsWith("tools said:")),
      undefined,
      "the first answer",
    );
    const prompts = rig.currentTexts().filter((t) => t.includes("rm -rf")).length;

    modelRuns("rm -rf dist");
    await rig.userSends(rig.allowedSender, "and dist");
    await waitFor(
      () => rig.currentTexts().filter((t) => t.startsWith("tools said:")).length === 2,
      undefined,
      "2nd answer",
    );
    expect(await exists(join(workspace, "dist"))).toBe(false);
    expect(rig.currentTexts().filter((t) => t.includes("rm -rf")).length).toBe(prompts); // no new prompt
    expect(rig.buttons()).toEqual([]);
  });

  it("no answer within the timeout is a denial", async () => {
    await startGateway({ timeoutSeconds: 0.5 });
    modelRuns("rm -rf build");
    await rig.userSends(rig.allowedSender, "clean the build folder");
    await waitFor(
      () => rig.currentTexts().some((t) => t.startsWith("tools said:")),
      undefined,
      "the final answer",
    );
    expect(await exists(join(workspace, "build"))).toBe(true);
    expect(String(toolResults(fake.requests.at(-1))[0]!.content)).toMatch(/no answer/i);
    expect(rig.buttons()).toEqual([]);
  });

  it("/stop while the prompt is open stops the turn; the command never runs", async () => {
    await startGateway();
    modelRuns("rm -rf build");
    await rig.userSends(rig.allowedSender, "clean the build folder");
    await promptShown();
    await rig.userSends(rig.allowedSender, "/stop");
    await waitFor(
      () => rig.currentTexts().some((t) => t.startsWith("Stopped")),
      undefined,
      "the stop notice",
    );
    await waitFor(() => rig.buttons().length === 0, undefined, "the prompt closed");
    expect(shown("rm -rf build")).toMatch(/stopped/i);
    expect(await exists(join(workspace, "build"))).toBe(true);
    expect(rig.currentTexts().some((t) => t.startsWith("tools said:"))).toBe(false);
  });

  it("mode off never asks", async () => {
    await startGateway({ mode: "off" });
    modelRuns("rm -rf build");
    await rig.userSends(rig.allowedSender, "clean the build folder");
    await waitFor(
      () => rig.currentTexts().some((t) => t.startsWith("tools said:")),
      undefined,
      "the final answer",
    );
    expect(await exists(join(workspace, "build"))).toBe(false);
    expect(rig.currentTexts().filter((t) => t.includes("rm -rf build"))).toEqual([]);
  });

  it("ask_human: the question's options are buttons and the press is the tool's result", async () => {
    await startGateway();
    fake.setHandler((req) => {
      const last = req.body.messages.at(-1);
      if (last?.role === "tool") return { content: `you chose: ${String(last.content)}` };
      return { toolCalls: [toolCall("ask_human", { question: "Which colour?", options: ["red", "blue"] })] };
    });
    await rig.userSends(rig.allowedSender, "paint it");
    await waitFor(() => rig.buttons().includes("blue"), undefined, "the question's buttons");
    expect(shown("Which colour?")).toBeDefined();
    await rig.press(rig.allowedSender, "blue");
    await waitFor(
      () => rig.currentTexts().some((t) => t.startsWith("you chose:")),
      undefined,
      "the final answer",
    );
    expect(rig.currentTexts().find((t) => t.startsWith("you chose:"))).toContain("blue");
    expect(rig.buttons()).toEqual([]);
  });
});
