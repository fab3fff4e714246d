#!/usr/bin/env node
/**
 * The palaver CLI's entry: the Node version is checked before anything else loads, so an older
 * Node gets one line saying what to install rather than a syntax error from inside a package.
 */
import module from "node:module";
import { unsupportedNodeMessage } from "./util/node-version.js";

const unsupported = unsupportedNodeMessage(process.versions.node);
if (unsupported) {
  process.stderr.write(`${unsupported}\n`);
  process.exit(1);
}

// Node keeps the code it compiles for palaver and its packages on disk and reuses it on the next
// start (NODE_COMPILE_CACHE names the folder; the default is under the temp folder). Absent before
// Node 22.1, so only where it exists.
if (typeof module.enableCompileCache === "function") module.enableCompileCache();

await import("./cli/program.js");
