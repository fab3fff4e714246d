#!/usr/bin/env node
/**
 * Builds the web chat page (web/) into dist/web/, which the gateway serves:
 *   dist/web/index.html               web/index.html naming the hashed assets
 *   dist/web/assets/app.<hash>.js     web/src/main.ts bundled (marked, DOMPurify) and minified
 *   dist/web/assets/style.<hash>.css  web/style.css minified
 * and beside each file its brotli (.br) and gzip (.gz) copy, which the server sends to browsers that
 * take them. Compressed here, not by the gateway: brotli's encoder, run on libuv's threads, left
 * ~3.5 MB in their malloc arenas for the rest of the process's life (the web bench's idle RSS).
 * The hash is of the content, so the server can cache the assets for good. Run by `npm run build`
 * (and so by `npm install`'s prepare); the browser tests and the web bench run it when dist/web
 * is missing. Usage: node scripts/build-web.mjs [outDir]
 */
import { Buffer } from "node:buffer";
import { createHash } from "node:crypto";
import { mkdir, readFile, rm, writeFile } from "node:fs/promises";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { brotliCompressSync, constants, gzipSync } from "node:zlib";
import { build } from "esbuild";

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const WEB = join(ROOT, "web");

/** The placeholders web/index.html uses, replaced by the hashed names. */
const SCRIPT_REF = "/assets/app.js";
const STYLE_REF = "/assets/style.css";

function hashOf(bytes) {
  return createHash("sha256").update(bytes).digest("hex").slice(0, 12);
}

async function bundle(entry, loader) {
  const result = await build({
    entryPoints: [join(WEB, entry)],
    bundle: true,
    minify: true,
    target: "es2022",
    format: "esm",
    platform: "browser",
    legalComments: "none",
    write: false,
    ...(loader ? { loader } : {}),
    logLevel: "warning",
  });
  const [file] = result.outputFiles;
  if (!file) throw new Error(`esbuild produced nothing for ${entry}`);
  return file.contents;
}

/** Writes the page into `outDir`; returns the asset names. */
export async function buildWeb(outDir = join(ROOT, "dist", "web")) {
  const [js, css, html] = await Promise.all([
    bundle("src/main.ts"),
    bundle("style.css"),
    readFile(join(WEB, "index.html"), "utf8"),
  ]);
  const app = `app.${hashOf(js)}.js`;
  const style = `style.${hashOf(css)}.css`;
  for (const ref of [SCRIPT_REF, STYLE_REF]) {
    if (!html.includes(`"${ref}"`)) throw new Error(`web/index.html must refer to "${ref}"`);
  }
  const page = html
    .replace(`"${SCRIPT_REF}"`, `"/assets/${app}"`)
    .replace(`"${STYLE_REF}"`, `"/assets/${style}"`);
  // Old hashes go: the folder holds exactly one build.
  await rm(outDir, { recursive: true, force: true });
  await mkdir(join(outDir, "assets"), { recursive: true });
  await Promise.all([
    writeWithCompressed(join(outDir, "assets", app), js),
    writeWithCompressed(join(outDir, "assets", style), css),
    writeWithCompressed(join(outDir, "index.html"), page),
  ]);
  return { app, style };
}

/** `path`, and its brotli (best) and gzip (level 9) copies as `path`.br and `path`.gz. */
export async function writeWithCompressed(path, contents) {
  const bytes = Buffer.from(contents);
  const br = brotliCompressSync(bytes, { params: { [constants.BROTLI_PARAM_QUALITY]: 11 } });
  await Promise.all([
    writeFile(path, bytes),
    writeFile(`${path}.br`, br),
    writeFile(`${path}.gz`, gzipSync(bytes, { level: 9 })),
  ]);
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const outDir = process.argv[2] ? resolve(process.argv[2]) : undefined;
  const { app, style } = await buildWeb(outDir);
  console.log(`web: ${app}, ${style} in ${outDir ?? "dist/web"}`);
}
