import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { MINIMUM_NODE, unsupportedNodeMessage } from "../../src/util/node-version.js";
import { ROOT } from "../helpers/cli.js";

describe("unsupportedNodeMessage", () => {
  it("accepts the minimum and anything newer", () => {
    for (const version of ["22.13.0", "22.13.1", "22.20.0", "23.0.0", "24.1.0", "100.0.0"]) {
      expect(unsupportedNodeMessage(version)).toBeNull();
    }
  });

  it("names the minimum and the version found for anything older", () => {
    for (const version of ["22.12.9", "22.0.0", "20.19.5", "18.20.0"]) {
      const message = unsupportedNodeMessage(version);
      expect(message).toContain("Node.js 22.13.0 or newer");
      expect(message).toContain(`this is Node.js ${version}`);
    }
  });

  it("reads a pre-release's numbers (22.13.0-nightly…) like the release's", () => {
    expect(unsupportedNodeMessage("22.13.0-nightly20250101")).toBeNull();
    expect(unsupportedNodeMessage("22.12.0-rc.1")).not.toBeNull();
  });

  it("asks for the Node that package.json's engines names", async () => {
    const pkg = JSON.parse(await readFile(join(ROOT, "package.json"), "utf8")) as {
      engines: { node: string };
    };
    expect(pkg.engines.node).toBe(`>=${MINIMUM_NODE.replace(/\.0$/, "")}`);
  });
});
