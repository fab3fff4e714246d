import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import * as z from "zod";
import { createDefaultTools } from "../../../src/agent/tools/index.js";
import { defineTool } from "../../../src/agent/tools/types.js";
import { ConfigSchema } from "../../../src/config/schema.js";
import { TempDirs, makeContext } from "./helpers.js";

describe("createDefaultTools", () => {
  const temps = new TempDirs();
  afterEach(() => temps.cleanup());

  it("registers nanobot's tools with nanobot's parameter names, and the search tools", () => {
    const reg = createDefaultTools(ConfigSchema.parse({}), "/tmp/unused-workspace");
    const params = Object.fromEntries(
      reg
        .definitions()
        .map((d) => [
          d.function.name,
          Object.keys((d.function.parameters as { properties: Record<string, unknown> }).properties),
        ]),
    );
    expect(params).toEqual({
      read_file: ["path"],
      write_file: ["path", "content"],
      edit_file: ["path", "old_text", "new_text"],
      list_dir: ["path"],
      find_files: ["pattern", "path"],
      grep: ["pattern", "path", "context"],
      exec: ["command", "working_dir"],
      web_search: ["query", "count"],
      web_fetch: ["url", "extractMode", "maxChars"],
      message: ["content", "channel", "chat_id", "media"],
    });
  });

  it("takes its limits from the config", async () => {
    const ws = await temps.make();
    const config = ConfigSchema.parse({
      tools: { readFileMaxChars: 10, restrictToWorkspace: true, exec: { denyPatterns: ["forbidden"] } },
    });
    const reg = createDefaultTools(config, ws);
    const { ctx } = makeContext({ workspace: ws });
    const call = (name: string, args: Record<string, unknown>) =>
      reg.execute({ id: "1", name, arguments: args, rawArguments: "" }, ctx);

    expect(await call("write_file", { path: "f.txt", content: "0123456789abcdef" })).toBe(
      "Wrote 16 bytes to f.txt",
    );
    expect(await readFile(join(ws, "f.txt"), "utf8")).toBe("0123456789abcdef");
    expect(await call("read_file", { path: "f.txt" })).toContain("[truncated: showing 10 of 16 characters]");
    expect(await call("read_file", { path: "/etc/hostname" })).toMatch(/^Error: access denied/);
    expect(await call("exec", { command: "echo forbidden" })).toMatch(/^Error: command refused/);
    expect(await call("web_fetch", { url: "http://127.0.0.1:1/" })).toMatch(/^Error: refused to fetch/);
  });
});

describe("ToolRegistry.definitions", () => {
  it("is one array while the tools stay the same (its token count is cached by identity), a new one after a change", () => {
    const reg = createDefaultTools(ConfigSchema.parse({}), "/tmp/unused-workspace");
    const first = reg.definitions();
    expect(reg.definitions()).toBe(first);

    reg.register(
      defineTool({
        name: "extra",
        description: "x",
        parameters: z.object({}),
        execute: () => Promise.resolve(""),
      }),
    );
    const second = reg.definitions();
    expect(second).not.toBe(first);
    expect(second.map((d) => d.function.name)).toContain("extra");
    reg.unregister("extra");
    expect(reg.definitions().map((d) => d.function.name)).toEqual(first.map((d) => d.function.name));
  });
});
