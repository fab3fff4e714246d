import { ErrorCode, McpError } from "@modelcontextprotocol/sdk/types.js";
import { describe, expect, it } from "vitest";
import { ToolRegistry } from "../../src/agent/tools/registry.js";
import {
  base64Bytes,
  describeCallError,
  formatCallResult,
  inputParameters,
  mcpToolName,
  MAX_TOOL_NAME,
  toolAllowed,
} from "../../src/mcp/convert.js";
import { ToolError } from "../../src/util/errors.js";
import { testContext } from "./helpers.js";

describe("mcpToolName", () => {
  it("prefixes and sanitizes to [a-zA-Z0-9_-]", () => {
    expect(mcpToolName("github", "search_issues")).toBe("mcp_github_search_issues");
    expect(mcpToolName("my server", "files.read/v2")).toBe("mcp_my_server_files_read_v2");
    expect(mcpToolName("a-b", "ünï")).toBe("mcp_a-b__n_");
  });

  it("cuts long names to 64 characters with a hash that keeps them apart", () => {
    const a = mcpToolName("server", `${"x".repeat(80)}_one`);
    const b = mcpToolName("server", `${"x".repeat(80)}_two`);
    expect(a).toHaveLength(MAX_TOOL_NAME);
    expect(b).toHaveLength(MAX_TOOL_NAME);
    expect(a).not.toBe(b);
    expect(a).toMatch(/^mcp_server_x+_[0-9a-f]{8}$/);
    expect(mcpToolName("server", `${"x".repeat(80)}_one`)).toBe(a);
  });
});

describe("toolAllowed", () => {
  it("applies allow then deny, by server name or exposed name", () => {
    expect(toolAllowed("echo", "mcp_s_echo", undefined)).toBe(true);
    expect(toolAllowed("echo", "mcp_s_echo", { allow: ["echo"] })).toBe(true);
    expect(toolAllowed("add", "mcp_s_add", { allow: ["echo"] })).toBe(false);
    expect(toolAllowed("add", "mcp_s_add", { allow: ["mcp_s_add"] })).toBe(true);
    expect(toolAllowed("add", "mcp_s_add", { allow: ["*"], deny: ["add"] })).toBe(false);
    expect(toolAllowed("add", "mcp_s_add", { deny: ["mcp_s_add"] })).toBe(false);
    expect(toolAllowed("add", "mcp_s_add", { allow: [] })).toBe(false);
  });
});

describe("inputParameters", () => {
  const serverSchema = {
    $schema: "http://json-schema.org/draft-07/schema#",
    type: "object",
    properties: {
      path: { type: "string", description: "file path", format: "uri-reference" },
      node: { $ref: "#/$defs/Node" },
    },
    required: ["path"],
    additionalProperties: false,
    $defs: { Node: { type: "object", properties: { id: { type: "integer", minimum: 1 } } } },
  };

  it("shows the model the server's JSON Schema unchanged (through ToolRegistry.definitions)", () => {
    const registry = new ToolRegistry();
    registry.register({
      name: "mcp_s_t",
      description: "d",
      parameters: inputParameters(serverSchema),
      execute: async () => "ok",
    });
    const { $schema: _drop, ...expected } = serverSchema;
    expect(registry.definitions()[0]!.function.parameters).toEqual(expected);
  });

  it("gives a schema without properties an empty object of them, and accepts any object", async () => {
    const registry = new ToolRegistry();
    registry.register({
      name: "t",
      description: "d",
      parameters: inputParameters({ type: "object", id: "legacy" }),
      execute: async (args) => JSON.stringify(args),
    });
    const params = registry.definitions()[0]!.function.parameters;
    expect(params).toMatchObject({ type: "object", properties: {} });
    expect(params).not.toHaveProperty("id");
    const ctx = testContext();
    const call = (args: Record<string, unknown>) =>
      registry.execute({ id: "1", name: "t", arguments: args, rawArguments: JSON.stringify(args) }, ctx);
    // The server validates its own arguments: palaver passes them through as they are.
    expect(await call({ anything: [1, 2], nested: { x: true } })).toBe(
      '{"anything":[1,2],"nested":{"x":true}}',
    );
  });
});

describe("formatCallResult", () => {
  const opts = { maxChars: 10_000 };

  it("joins text, describes images, audio and resources, and notes where media was saved", () => {
    const text = formatCallResult(
      {
        content: [
          { type: "text", text: "first" },
          { type: "image", data: "AAECAwQ=", mimeType: "image/png" },
          { type: "audio", data: "AAEC", mimeType: "audio/wav" },
          { type: "resource", resource: { uri: "file:///a.md", mimeType: "text/markdown", text: "# A" } },
          { type: "resource", resource: { uri: "file:///b.bin", blob: "AA==" } },
          {
            type: "resource_link",
            uri: "https://x.invalid/r",
            name: "r",
            mimeType: "text/html",
            description: "a page",
          },
        ],
      },
      { ...opts, saved: new Map([[1, "media/pic.png"]]) },
    );
    expect(text).toBe(
      [
        "first",
        "[image: image/png, 5 bytes, saved to media/pic.png]",
        "[audio: audio/wav, 3 bytes]",
        "[resource file:///a.md (text/markdown)]\n# A",
        "[resource file:///b.bin: 1 bytes]",
        "[resource link: r <https://x.invalid/r> (text/html) - a page]",
      ].join("\n"),
    );
  });

  it("adds structured content as JSON unless a text block already carries it", () => {
    expect(formatCallResult({ content: [], structuredContent: { sum: 3 } }, opts)).toBe(
      'Structured result:\n{\n  "sum": 3\n}',
    );
    expect(
      formatCallResult(
        { content: [{ type: "text", text: '{ "sum": 3 }' }], structuredContent: { sum: 3 } },
        opts,
      ),
    ).toBe('{ "sum": 3 }');
    expect(
      formatCallResult({ content: [{ type: "text", text: "three" }], structuredContent: { sum: 3 } }, opts),
    ).toBe('three\nStructured result:\n{\n  "sum": 3\n}');
  });

  // A server's result is untrusted input. Regression: 20,000 nested arrays made
  // JSON.stringify throw RangeError (stack overflow) out of formatCallResult.
  it("describes a structured result nested too deeply to print instead of throwing", () => {
    let deep: unknown = 1;
    for (let i = 0; i < 20_000; i++) deep = [deep];
    expect(
      formatCallResult({ content: [{ type: "text", text: "x" }], structuredContent: { a: deep } }, opts),
    ).toBe("x\nStructured result: (nested too deeply to show)");
  });

  it("recognises a big structured result sent again as text without parsing it", () => {
    const structured = { rows: Array.from({ length: 50_000 }, (_, i) => ({ i, name: `row ${i}` })) };
    const text = JSON.stringify(structured);
    expect(text.length).toBeGreaterThan(1024 * 1024);
    const out = formatCallResult({ content: [{ type: "text", text }], structuredContent: structured }, opts);
    expect(out).not.toContain("Structured result");
  });

  it("marks isError results and says so when there is nothing to show", () => {
    expect(formatCallResult({ content: [{ type: "text", text: "no such repo" }], isError: true }, opts)).toBe(
      "Error: no such repo",
    );
    expect(formatCallResult({ content: [], isError: true }, opts)).toBe(
      "Error: the tool reported a failure without saying why.",
    );
    expect(formatCallResult({ content: [] }, opts)).toBe("(the tool returned no output)");
  });

  it("caps long results with a notice", () => {
    const text = formatCallResult(
      { content: [{ type: "text", text: "a".repeat(5000) }] },
      { maxChars: 1000 },
    );
    expect(text.length).toBeLessThan(1200);
    expect(text).toContain("truncated");
    expect(text.startsWith("a".repeat(800))).toBe(true);
  });
});

describe("base64Bytes", () => {
  it("computes the decoded size", () => {
    for (const bytes of [0, 1, 2, 3, 4, 5, 100]) {
      expect(base64Bytes(Buffer.alloc(bytes, 7).toString("base64"))).toBe(bytes);
    }
  });
});

describe("describeCallError", () => {
  const info = { tool: "mcp_s_slow", server: "s", timeoutSeconds: 30 };

  it("says in plain words that a timed-out call was cancelled", () => {
    const text = describeCallError(new McpError(ErrorCode.RequestTimeout, "Request timed out"), info);
    expect(text).toBe(
      'Error: mcp_s_slow did not finish within 30 s, so it was cancelled (the MCP server "s" was told to stop). ' +
        "It may be slow or stuck: try a smaller request, or go on without this tool.",
    );
  });

  it("explains a closed connection, passes ToolError messages on and names other failures", () => {
    expect(describeCallError(new McpError(ErrorCode.ConnectionClosed, "Connection closed"), info)).toContain(
      "closed the connection while running mcp_s_slow",
    );
    expect(describeCallError(new ToolError('the MCP server "s" is not available'), info)).toBe(
      'Error: the MCP server "s" is not available',
    );
    expect(describeCallError(new McpError(ErrorCode.InternalError, "boom"), info)).toBe(
      "Error: mcp_s_slow failed: MCP error -32603: boom",
    );
  });
});
