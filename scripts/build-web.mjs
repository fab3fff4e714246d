#!/usr/bin/env node
/**
 * Builds the web chat page (web/) into dist/web/, which the gateway serves:
 *   dist/web/index.html               web/index.html naming the hashed assets
 *   dist/web/assets/app.<hash>.js     web/src/main.ts bundled (marked, DOMPurify) and minified
 *   dist/web/assets/style.<hash>.css  web/style.css minified
 * The hash is of the content, so the server can cache the assets for good. Run by `npm run build`
 * (and so by `npm install`'s prepare); the browser tests and the web bench run it when dist/web
 * is missing. Usage: node scripts/build-web.mjs [outDir]
 */
import { createHash } from "node:crypto";
import { mkdir, readFile, rm, writeFile } from "node:fs/promises";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
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
    writeFile(join(outDir, "assets", app), js),
    writeFile(join(outDir, "assets", style), css),
    writeFile(join(outDir, "index.html"), page),
  ]);
  return { app, style };
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const outDir = process.argv[2] ? resolve(process.argv[2]) : undefined;
  const { app, style } = await buildWeb(outDir);
  console.log(`web: ${app}, ${style} in ${outDir ?? "dist/web"}`);
}
