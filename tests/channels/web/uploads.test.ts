/**
 * Uploads on their own, through a real HTTP server: unsent ones are deleted after their time and
 * when the channel stops, sent ones are the message's and stay, and the quota holds for a body
 * that does not say its size. A file the agent sends is shown under a safe name.
 */
import { mkdtemp, readdir, rm, writeFile } from "node:fs/promises";
import { createServer, request as httpRequest, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { UploadResult } from "../../../src/channels/web/protocol.js";
import { AgentFiles, Uploads } from "../../../src/channels/web/uploads.js";
import { HttpError } from "../../../src/util/http-body.js";
import { captureLog } from "../../helpers/log.js";

const TTL_MS = 60 * 60_000;

let dir: string;
let server: Server;
let base: string;
let uploads: Uploads;
let now: number;

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), "palaver-uploads-"));
  now = 1_800_000_000_000;
  uploads = new Uploads(dir, {
    maxBytes: 1000,
    quotaBytes: 1500,
    log: captureLog().log,
    ttlMs: TTL_MS,
    now: () => now,
  });
  server = createServer((req, res) => {
    uploads.save(req, "a.txt").then(
      (result) => res.writeHead(201).end(JSON.stringify(result)),
      (err: unknown) => {
        const status = err instanceof HttpError ? err.status : 500;
        res.writeHead(status, { connection: "close" }).end(JSON.stringify({ error: String(err) }));
      },
    );
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterEach(async () => {
  await uploads.stop();
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
  await rm(dir, { recursive: true, force: true });
});

/** Sends `bytes` in two writes without a Content-Length (chunked), as a client that does not say. */
function send(bytes: number): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(`${base}/`, { method: "POST" }, (res) => {
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (t: string) => (body += t));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on("error", reject);
    req.write(Buffer.alloc(Math.floor(bytes / 2)));
    req.end(Buffer.alloc(bytes - Math.floor(bytes / 2)));
  });
}

async function stored(): Promise<string[]> {
  const entries = await readdir(join(dir, "media"), { recursive: true, withFileTypes: true }).catch(() => []);
  return entries.filter((e) => e.isFile()).map((e) => e.name);
}

describe("Uploads", () => {
  it("deletes an upload no message took within its time, and keeps one that was sent", async () => {
    const sent = JSON.parse((await send(100)).body) as UploadResult;
    const unsent = JSON.parse((await send(200)).body) as UploadResult;
    expect(await stored()).toHaveLength(2);
    const { paths } = uploads.take([sent.id]);

    now += TTL_MS - 1;
    await uploads.sweep();
    expect(await stored()).toHaveLength(2);
    now += 1;
    await uploads.sweep();
    expect(await stored()).toEqual([paths[0]!.split("/").pop()]);
    expect(() => uploads.take([unsent.id])).toThrow(/unknown or expired/);
  });

  it("deletes the unsent uploads when the channel stops: their ids die with it", async () => {
    const sent = JSON.parse((await send(100)).body) as UploadResult;
    await send(100);
    uploads.take([sent.id]);
    await uploads.stop();
    expect(await stored()).toHaveLength(1);
  });

  it("holds the quota for a body without a Content-Length, leaving nothing of the refused one", async () => {
    expect((await send(1000)).status).toBe(201);
    const over = await send(600);
    expect(over.status).toBe(413);
    expect(over.body).toContain("channels.web.uploadQuotaBytes");
    expect(await stored()).toHaveLength(1);
    // The refused bytes no longer count: what is left of the quota is still there.
    expect((await send(500)).status).toBe(201);
  });
});

describe("AgentFiles", () => {
  it("shows a file the agent sent without the format characters that would disguise its name", async () => {
    const path = join(dir, "a\u202Egnp.exe");
    await writeFile(path, "MZ");
    const ref = await new AgentFiles().register(path);
    expect(ref).toMatchObject({ name: "agnp.exe", bytes: 2 });
  });
});
