#!/usr/bin/env node
/**
 * Builds the daemon (src/main.ts) into dist/ as a handful of bundled ES modules:
 *   dist/main.js             the CLI and everything every command needs
 *   dist/<name>-<hash>.js    what is imported lazily (each platform's adapter, the MCP SDK, the
 *                            tokenizer's encodings, the HTML converter): loaded only when the
 *                            configuration uses it, as with the unbundled build
 *   dist/cjs/<group>.cjs     packages bundled as CommonJS and compiled ahead: each chat platform's
 *                            SDK (loaded by its adapter) and those every start loads, each with
 *                            its V8 code cache beside it (.cjs.cache); see PRECOMPILED below
 *   dist/**.map              source maps (NODE_OPTIONS=--enable-source-maps shows them in stacks)
 *
 * Why bundle: Node resolves, reads and wraps every module file on its own; the three platform SDKs
 * alone are over a thousand files. One file per lazy part starts the gateway about twice as fast
 * (bench/startup.ts: 1.2 s → 0.7 s to ready with all three platforms on a 2-core machine).
 * Identifiers are not minified: SDKs and our errors use class names (`err.name`), and the logs
 * show them. Types are checked by `npm run typecheck`, not here. Usage: node scripts/build-server.mjs [outDir]
 */
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { readdir, rm } from "node:fs/promises";
import { createRequire } from "node:module";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { compileFunction } from "node:vm";
import { build } from "esbuild";

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..");

/**
 * Optional native add-ons the SDKs try to require inside try/catch (ws; @discordjs/ws for
 * zlib-sync); bundling them would fail the build where they are absent, so they stay runtime lookups.
 */
const OPTIONAL_NATIVE = ["bufferutil", "utf-8-validate", "zlib-sync"];

/**
 * undici for @slack/socket-mode (3.x: its SocketModeClient and SlackWebSocket), built as undici's
 * index.js builds these names (undici 7) and nothing else; required from socket-mode's folder, so it
 * is the undici socket-mode would get. Its `fetch` wraps the real one as index.js does in a bundle
 * (no __filename there): a failure's stack becomes the caller's. Loading undici/lib/global (fetch
 * and websocket require it) installs the global dispatcher, also as index.js does.
 */
const UNDICI_FOR_SOCKET_MODE = `"use strict";
const Dispatcher = require("undici/lib/dispatcher/dispatcher");
Object.assign(Dispatcher.prototype, require("undici/lib/api"));
const { fetch: fetchImpl } = require("undici/lib/web/fetch");
const { CloseEvent, ErrorEvent, MessageEvent } = require("undici/lib/web/websocket/events");
const { WebSocket, ping } = require("undici/lib/web/websocket/websocket");
function fetch(input, init = undefined) {
  return fetchImpl(input, init).catch((err) => {
    if (err && typeof err === "object") Error.captureStackTrace(err, fetch);
    throw err;
  });
}
module.exports = {
  Agent: require("undici/lib/dispatcher/agent"),
  buildConnector: require("undici/lib/core/connect"),
  fetch,
  WebSocket,
  ping,
  CloseEvent,
  ErrorEvent,
  MessageEvent,
};
`;

/**
 * Modules the SDKs import but palaver never runs (or runs a few parts of), replaced in the bundle so
 * that no start pays for loading them (measured on a 2-core machine, importing the bundle alone):
 * - @opentelemetry/api (42 KB): prom-client reads it only for exemplars, which palaver does not
 *   turn on. ~5 ms of every start.
 * - zod's translations of its error messages into 47 other languages (300 KB): palaver keeps the
 *   English default, but `z` and zod's core export them all as `locales`. ~13 ms of every start.
 * - undici's index.js (734 KB bundled: mock agents, cache stores with sqlite, proxy agents,
 *   EventSource, WebSocketStream, cookies, interceptors...), of which @slack/socket-mode reads eight
 *   names: UNDICI_FOR_SOCKET_MODE, the parts behind them alone (485 KB). The Slack chunk goes from
 *   891 to 644 KB and its import from 101 to 64 ms (medians of 5, after the chunks it imports).
 * A stub with `checkNames` must define every name its importer reads, or the build fails: an SDK
 * update that reads one more name gets an error here rather than `undefined` at run time.
 */
const STUBS = [
  {
    filter: /^@opentelemetry\/api$/,
    importer: /[\\/]prom-client[\\/]/,
    contents: `const off = () => { throw new Error("prom-client's exemplars are not supported in palaver's build"); };
module.exports = { trace: { getSpan: off }, context: { active: off } };`,
    checkNames: true,
  },
  {
    filter: /^\.\.\/locales\/index\.js$/,
    importer: /[\\/]zod[\\/]v4[\\/]/,
    contents: 'export { default as en } from "./en.js";',
  },
  {
    filter: /^undici$/,
    importer: /[\\/]@slack[\\/]socket-mode[\\/]/,
    contents: UNDICI_FOR_SOCKET_MODE,
    checkNames: true,
  },
];

const stubsPlugin = {
  name: "stubs",
  setup(build) {
    for (const [index, stub] of STUBS.entries()) {
      build.onResolve({ filter: stub.filter }, (args) => {
        if (!stub.importer.test(args.importer)) return undefined;
        const problem = stub.checkNames ? checkNames(stub, args) : undefined;
        if (problem)
          return { errors: [{ text: `${args.path} for ${relative(ROOT, args.importer)}: ${problem}` }] };
        return {
          path: relative(ROOT, resolve(args.resolveDir, args.path)),
          namespace: "stub",
          pluginData: index,
        };
      });
    }
    build.onLoad({ filter: /.*/, namespace: "stub" }, (args) => ({
      contents: STUBS[args.pluginData].contents,
      resolveDir: dirname(join(ROOT, args.path)),
    }));
  },
};

/**
 * Code inside a package's own file that palaver's start would run for nothing, replaced as the file
 * is bundled (a stub cannot reach it: it is not a module of its own):
 * - @vladfrangu/async_event_emitter (the event emitter of Discord's SDK) carries a browser copy of
 *   Node's util.inspect (node-inspect-extracted, ~2,100 lines, run when the module loads) for one
 *   use: describing an error no listener took. Node's own inspect does that. The Discord chunk's
 *   import goes from 54 to 38 ms (medians of 6, after the chunks it imports).
 * The region runs from `from` to `to`, both found exactly once, and ends with a `var { … } = …`
 * whose names the replacement must give the rest of the file: `keep`, and nothing else the rest of
 * the file reads, or the build fails. An SDK update that reads one more name gets an error here
 * rather than a ReferenceError at run time.
 */
const PATCHES = [
  {
    file: /[\\/]@vladfrangu[\\/]async_event_emitter[\\/]dist[\\/]index\.mjs$/,
    from: "// node_modules/node-inspect-extracted/dist/inspect.js\n",
    to: "} = import_inspect.default;\n",
    keep: ["inspect"],
    replacement: 'import { inspect } from "node:util";\n',
  },
];

export const patchesPlugin = {
  name: "patches",
  setup(build) {
    for (const patch of PATCHES) {
      build.onLoad({ filter: patch.file }, (args) => {
        const source = readFileSync(args.path, "utf8");
        const { contents, problem } = applyPatch(patch, source);
        if (problem) return { errors: [{ text: `patch of ${relative(ROOT, args.path)}: ${problem}` }] };
        return { contents, loader: "js", resolveDir: dirname(args.path) };
      });
    }
  },
};

/** The patched source ({ contents }), or what stops the patch from applying safely ({ problem }). */
function applyPatch(patch, source) {
  const start = source.indexOf(patch.from);
  const end = source.indexOf(patch.to);
  if (start < 0 || end < start)
    return {
      problem: `the region (${JSON.stringify(patch.from)} … ${JSON.stringify(patch.to)}) is not there`,
    };
  if (source.indexOf(patch.from, start + 1) >= 0 || source.indexOf(patch.to, end + 1) >= 0)
    return { problem: "the region's bounds occur more than once" };
  const after = end + patch.to.length;
  const region = source.slice(start, after);
  const rest = source.slice(0, start) + source.slice(after);
  // The names the region's last statement binds (`var { a, b: c, ... } = ...`), comments aside.
  const binding = region.slice(region.lastIndexOf("var {")).replace(/\/\/.*$/gm, "");
  const bound = [...binding.matchAll(/(\w+)\s*(?:,|\n|$)/g)].map((m) => m[1]);
  if (!patch.keep.every((name) => bound.includes(name)))
    return { problem: `it no longer binds ${patch.keep.join(", ")}` };
  const read = bound.filter((name) => !patch.keep.includes(name) && new RegExp(`\\b${name}\\b`).test(rest));
  if (read.length)
    return {
      problem: `the rest of the file reads ${read.join(", ")} too (add it to keep and the replacement)`,
    };
  return { contents: source.slice(0, start) + patch.replacement + source.slice(after) };
}

/**
 * What is wrong with giving the importer this stub, or undefined when nothing is: the importer must
 * be CommonJS that only reads names (`const x = require("undici")`, then `x.Name`), and the stub,
 * run here, must define each of them.
 */
function checkNames(stub, { kind, importer, path, resolveDir }) {
  if (kind !== "require-call") return `an ${kind}; the check reads require() calls only`;
  const source = readFileSync(importer, "utf8");
  // Every require() of the path, with the name it is bound to (undefined: not bound to one).
  const bindings = [...source.matchAll(/(?:\b(?:const|let|var) (\w+) = )?require\((["'])([^"']+)\2\)/g)]
    .filter((m) => m[3] === path)
    .map((m) => m[1]);
  if (bindings.length === 0 || bindings.includes(undefined)) {
    return "a require() not bound to a name; the check cannot tell which names it reads";
  }
  const read = new Set();
  for (const binding of bindings) {
    const uses = [...source.matchAll(new RegExp(`\\b${binding}\\b(?:\\.(\\w+))?`, "g"))];
    if (uses.filter((m) => !m[1]).length > 1)
      return `${binding} is used whole; the check cannot tell which names it reads`;
    for (const m of uses) if (m[1]) read.add(m[1]);
  }
  const module = { exports: {} };
  const run = compileFunction(stub.contents, ["module", "exports", "require"]);
  run(module, module.exports, createRequire(join(resolveDir, "stub.cjs")));
  const missing = [...read].filter((name) => module.exports[name] === undefined);
  return missing.length ? `the stub does not define ${missing.join(", ")} (add it to the stub)` : undefined;
}

/**
 * Packages bundled by group, as CommonJS, into dist/cjs/<group>.cjs and loaded by
 * src/util/code-cache.ts from the V8 code cache the build writes beside each, made after loading it
 * once: Node 20 caches no compiled code for ES modules, and compiling the three platforms' SDKs
 * from source was about half of loading them (108–170 → 53–85 ms for all three, 5 pairs;
 * bench/README.md). A platform's group loads with its adapter, only when the platform is enabled;
 * `core` holds the packages every start loads (not zod: the bundle keeps only the parts of it
 * palaver calls, about half, where a group would hold all of it). In the daemon's bundle an import
 * of one of these packages becomes a module that takes the package's exports from its group's file
 * (precompiledPlugin), so palaver's sources import them as usual, and a group's packages are
 * loaded together, once, sharing their classes.
 */
const PRECOMPILED = {
  telegram: ["grammy", "@grammyjs/auto-retry"],
  core: ["pino", "prom-client", "commander", "dotenv", "croner"],
};

/** Options both builds share. */
const COMMON = {
  bundle: true,
  platform: "node",
  target: "node20",
  packages: "bundle",
  // @slack/bolt is loaded from node_modules by Node at run time, as the plain build will load every SDK.
  external: [...OPTIONAL_NATIVE, "@slack/bolt"],
  minifyWhitespace: true,
  minifySyntax: true,
  sourcemap: "linked",
  legalComments: "none",
  logLevel: "warning",
};

/**
 * Bundles each group of PRECOMPILED, then writes the code caches in a child process: the code
 * must have run for the functions its loading compiles to be in the cache, the build should not
 * run SDKs in its own process, and through tsx the child writes with the very code-cache.ts that
 * will read. Returns, per package, its group and the names it exports.
 */
async function buildPrecompiled(outDir) {
  const files = {};
  for (const [group, packages] of Object.entries(PRECOMPILED)) {
    files[group] = join(outDir, "cjs", `${group}.cjs`);
    const requires = packages.map((name) => `${JSON.stringify(name)}: require(${JSON.stringify(name)})`);
    await build({
      ...COMMON,
      stdin: {
        contents: `module.exports = { ${requires.join(", ")} };`,
        resolveDir: ROOT,
        sourcefile: `cjs/${group}.cjs`,
      },
      outfile: files[group],
      format: "cjs",
      plugins: [stubsPlugin, patchesPlugin],
    });
  }
  const writer = join(ROOT, "scripts", "write-code-cache.ts");
  const names = JSON.parse(
    execFileSync(process.execPath, ["--import", "tsx", writer, ...Object.values(files)], {
      cwd: ROOT,
      encoding: "utf8",
    }),
  );
  const packages = {};
  for (const [group, file] of Object.entries(files)) {
    for (const name of PRECOMPILED[group]) packages[name] = { group, exports: names[file][name] };
  }
  return packages;
}

/** A valid name for `export const { … }` (a package may export others, e.g. "default"). */
const EXPORTABLE = /^(?!default$)[A-Za-z_$][\w$]*$/;

/** In the daemon's bundle: each PRECOMPILED package is a part of its group's file. */
function precompiledPlugin(packages) {
  const loader = join(ROOT, "src", "util", "code-cache.ts");
  return {
    name: "precompiled",
    setup(build) {
      build.onResolve({ filter: /^[@\w]/ }, (args) =>
        packages[args.path] ? { path: args.path, namespace: "precompiled" } : undefined,
      );
      build.onLoad({ filter: /.*/, namespace: "precompiled" }, (args) => {
        const { group, exports } = packages[args.path];
        return {
          contents: `import { requireWithCodeCache } from ${JSON.stringify(loader)};
const pkg = requireWithCodeCache(new URL("./cjs/${group}.cjs", import.meta.url))[${JSON.stringify(args.path)}];
export default pkg;
export const { ${exports.filter((name) => EXPORTABLE.test(name)).join(", ")} } = pkg;
`,
          loader: "js",
          resolveDir: ROOT,
        };
      });
    },
  };
}

/** Files of an earlier build go (not dist/web/, the page, built by build-web.mjs). */
async function clean(outDir) {
  const names = await readdir(outDir).catch(() => []);
  await Promise.all(
    names.filter((n) => n !== "web").map((n) => rm(join(outDir, n), { recursive: true, force: true })),
  );
}

export async function buildServer(outDir = join(ROOT, "dist")) {
  await clean(outDir);
  const precompiled = await buildPrecompiled(outDir);
  const result = await build({
    ...COMMON,
    entryPoints: [join(ROOT, "src", "main.ts")],
    outdir: outDir,
    splitting: true,
    format: "esm",
    plugins: [precompiledPlugin(precompiled), stubsPlugin, patchesPlugin],
    // discord.js is loaded from node_modules by Node, as its authors ship it (only the Discord adapter imports it).
    external: [...OPTIONAL_NATIVE, "discord.js"],
    // CommonJS packages inside an ES module bundle call require() for Node's built-ins.
    banner: {
      js: 'import { createRequire as __createRequire } from "node:module"; const require = __createRequire(import.meta.url);',
    },
    chunkNames: "[name]-[hash]",
    metafile: true,
  });
  return Object.keys(result.metafile.outputs).filter((name) => name.endsWith(".js"));
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const outDir = process.argv[2] ? resolve(process.argv[2]) : undefined;
  const files = await buildServer(outDir);
  console.log(`server: ${files.length} files in ${outDir ?? "dist"}`);
}
