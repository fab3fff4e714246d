import { describe, expect, it } from "vitest";
import { describeCall, MAX_DESCRIPTION_CHARS } from "../../src/approvals/describe.js";

describe("describeCall", () => {
  it("says what each tool will do", () => {
    expect(describeCall("exec", { command: "rm -rf build" })).toBe("Run the shell command: `rm -rf build`");
    expect(describeCall("exec", { command: "make", working_dir: "proj" })).toBe(
      "Run the shell command: `make` (in proj)",
    );
    expect(describeCall("write_file", { path: "/etc/hosts", content: "hello" })).toBe(
      "Write 5 characters to /etc/hosts",
    );
    expect(describeCall("edit_file", { path: "notes.md", old_text: "a", new_text: "b" })).toBe(
      "Edit notes.md",
    );
    expect(describeCall("web_fetch", { url: "https://example.com/x" })).toBe("Fetch https://example.com/x");
    expect(describeCall("spawn", { task: "summarize the logs", label: "logs" })).toBe(
      "Start a background task: logs",
    );
    expect(describeCall("spawn", { task: "summarize the logs" })).toBe(
      "Start a background task: summarize the logs",
    );
    expect(describeCall("mcp_github_create_issue", { title: "Bug" })).toBe(
      'Call mcp_github_create_issue with {"title":"Bug"}',
    );
  });

  it("keeps a command with backticks in one code span", () => {
    expect(describeCall("exec", { command: "echo `date`" })).toBe("Run the shell command: `` echo `date` ``");
    expect(describeCall("exec", { command: "a ``b`` c" })).toBe("Run the shell command: ```a ``b`` c```");
  });

  it("cuts long descriptions and long JSON with …", () => {
    const long = describeCall("exec", { command: `echo ${"x".repeat(2000)}` });
    expect(long).toHaveLength(MAX_DESCRIPTION_CHARS);
    expect(long.endsWith("…")).toBe(true);
    const json = describeCall("mcp_fs_write", { data: "y".repeat(1000) });
    expect(json.length).toBeLessThan(260);
    expect(json.startsWith('Call mcp_fs_write with {"data":"yyy')).toBe(true);
    expect(json.endsWith("…")).toBe(true);
  });

  it("never cuts a surrogate pair in half", () => {
    const text = describeCall("exec", { command: "😀".repeat(1000) });
    expect(text.endsWith("…")).toBe(true);
    expect(/[\uD800-\uDBFF]…$/.test(text)).toBe(false);
  });

  it("copes with arguments of the wrong type", () => {
    expect(describeCall("write_file", { path: 42 })).toBe("Write 0 characters to 42");
    expect(describeCall("exec", {})).toBe("Run the shell command: ``");
  });
});
