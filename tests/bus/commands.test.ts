import { describe, expect, it } from "vitest";
import { COMMANDS, helpText, parseCommand } from "../../src/bus/commands.js";

describe("parseCommand", () => {
  it("recognises the chat commands, with arguments and a Telegram @botname suffix", () => {
    expect(parseCommand("/new")).toEqual({ name: "new", args: "" });
    expect(parseCommand("  /STOP  ")).toEqual({ name: "stop", args: "" });
    expect(parseCommand("/new@palaver_bot")).toEqual({ name: "new", args: "" });
    expect(parseCommand("/status please")).toEqual({ name: "status", args: "please" });
  });

  it("recognises the owner's /pairing, which platform menus do not offer", () => {
    expect(parseCommand("/pairing approve K7M2QX9B")).toEqual({ name: "pairing", args: "approve K7M2QX9B" });
    expect(COMMANDS).not.toHaveProperty("pairing");
    expect(helpText()).toMatch(/For the owner:\n\/pairing — /);
  });

  it("leaves unknown commands and ordinary text to the model", () => {
    expect(parseCommand("/weather Paris")).toBeNull();
    expect(parseCommand("what does /new do?")).toBeNull();
    expect(parseCommand("/newer")).toBeNull();
    expect(parseCommand("/constructor")).toBeNull();
  });

  it("lists every command in the help text", () => {
    for (const name of ["new", "stop", "status", "help"]) expect(helpText()).toContain(`/${name}`);
  });

  it("says that /new saves the conversation into memory before starting fresh (issue 13)", () => {
    const line = helpText()
      .split("\n")
      .find((l) => l.startsWith("/new"));
    expect(line).toMatch(/MEMORY\.md.*HISTORY\.md.*then start fresh/);
  });
});
