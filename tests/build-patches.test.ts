/**
 * The build's source patches (PATCHES in scripts/build-server.mjs): the patched package bundled
 * alone, then run, does what the original did.
 */
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { build, type Plugin } from "esbuild";
import { describe, expect, it } from "vitest";
import { ROOT } from "./helpers/cli.js";

// A .mjs script without type declarations: imported by a computed name, typed here.
const BUILD_SCRIPT = pathToFileURL(join(ROOT, "scripts", "build-server.mjs")).href;

describe("async_event_emitter with Node's util.inspect instead of its own copy", () => {
  it("still describes an error nobody listened for, and carries no copy of inspect", async () => {
    const { patchesPlugin } = (await import(BUILD_SCRIPT)) as { patchesPlugin: Plugin };
    const result = await build({
      stdin: {
        contents: 'export { AsyncEventEmitter } from "@vladfrangu/async_event_emitter";',
        resolveDir: ROOT,
      },
      bundle: true,
      format: "esm",
      platform: "node",
      write: false,
      logLevel: "silent",
      plugins: [patchesPlugin],
    });
    const code = result.outputFiles[0]!.text;
    expect(code).not.toContain("require_inspect");
    // Run from a data: URL: the bundle imports only Node's built-ins, so it needs no file.
    const { AsyncEventEmitter } = (await import(`data:text/javascript,${encodeURIComponent(code)}`)) as {
      AsyncEventEmitter: new () => { emit(event: string, ...args: unknown[]): boolean };
    };
    // A non-Error is described with inspect (String() would give "[object Object]").
    expect(() => new AsyncEventEmitter().emit("error", { code: 42, reason: "gone" })).toThrow(
      "Unhandled 'error' event emitted, received { code: 42, reason: 'gone' }",
    );
  });
});
