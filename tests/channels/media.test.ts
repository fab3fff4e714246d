import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { mkdtemp, readdir, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { downloadFile, MediaTooLargeError, mediaPath, safeFileName } from "../../src/channels/media.js";

describe("safeFileName", () => {
  it("drops paths, control and special characters, keeps the extension, bounds the length", () => {
    expect(safeFileName("../../etc/passwd")).toBe("passwd");
    expect(safeFileName("my photo (1).jpg")).toBe("my_photo_(1).jpg");
    expect(safeFileName("a\u0000b;rm -rf $HOME.txt")).toBe("abrm_-rf_HOME.txt");
    expect(safeFileName("...")).toBe("file");
    const long = safeFileName(`${"x".repeat(200)}.pdf`);
    expect(long.length).toBeLessThanOrEqual(80);
    expect(long.endsWith(".pdf")).toBe(true);
  });

  it("removes bidi overrides, direction marks and zero-width characters, which disguise a name", () => {
    expect(safeFileName("a\u202Egnp.exe")).toBe("agnp.exe");
    const disguises = ["\u202A", "\u202B", "\u202C", "\u202D", "\u2066", "\u2067", "\u2068", "\u2069"];
    const invisible = ["\u200B", "\u200C", "\u200D", "\u200E", "\u200F", "\u2060", "\uFEFF", "\u00AD"];
    for (const c of [...disguises, ...invisible]) expect(safeFileName(`re${c}port.pdf`)).toBe("report.pdf");
    expect(safeFileName("\u202E\u200B")).toBe("file");
    expect(mediaPath("/ws", { channel: "web", chatId: "c" }, "x\u2067y.txt")).toMatch(/-xy\.txt$/);
  });

  it("puts media under workspace/media/<channel>/<chat>/ with a unique dated name", () => {
    const chat = { channel: "telegram", chatId: "-1001234" };
    const a = mediaPath("/ws", chat, "x.jpg", new Date("2026-11-22T10:00:00Z"));
    const b = mediaPath("/ws", chat, "x.jpg", new Date("2026-11-22T10:00:00Z"));
    expect(a).toMatch(/^\/ws\/media\/telegram\/-1001234\/20261122-[0-9a-f]{8}-x\.jpg$/);
    expect(a).not.toBe(b);
  });

  it("gives every chat a folder of its own, with no way out of media/<channel>/", () => {
    const folder = (chatId: string) => mediaPath("/ws", { channel: "slack", chatId }, "f").split("/")[4];
    expect(folder("C123")).toBe("C123");
    // Different ids never share a folder, and none is "..", "." or a dot-name.
    expect(folder("a/b")).toBe("a%2Fb");
    expect(folder("a_2Fb")).not.toBe(folder("a/b"));
    expect(folder("..")).toBe("%2E%2E");
    expect(folder(".pending")).toBe("%2Epending");
    expect(folder("%2E")).toBe("%252E");
    expect(folder("x".repeat(500))).toMatch(/^%h[0-9a-f]{40}$/);
  });
});

describe("downloadFile", () => {
  let server: Server;
  let base: string;
  let dir: string;
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), "palaver-media-"));
    server = createServer((req, res) => {
      if (req.url === "/small") res.end("hello");
      else if (req.url === "/declared-big") {
        res.writeHead(200, { "content-length": "5000" });
        res.end("x".repeat(5000));
      } else if (req.url === "/chunked-big") {
        res.writeHead(200, { "transfer-encoding": "chunked" });
        for (let i = 0; i < 10; i++) res.write("y".repeat(1000));
        res.end();
      } else {
        res.writeHead(404);
        res.end();
      }
    });
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterEach(async () => {
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
    await rm(dir, { recursive: true, force: true });
  });

  it("saves a file", async () => {
    const dest = join(dir, "media", "a.txt");
    await downloadFile({ url: `${base}/small`, dest, maxBytes: 100 });
    expect(await readFile(dest, "utf8")).toBe("hello");
  });

  it("refuses files over the limit by declared size, Content-Length or bytes received, leaving nothing", async () => {
    const dest = join(dir, "media", "b.bin");
    await expect(
      downloadFile({ url: `${base}/small`, dest, maxBytes: 100, expectedBytes: 101 }),
    ).rejects.toBeInstanceOf(MediaTooLargeError);
    await expect(downloadFile({ url: `${base}/declared-big`, dest, maxBytes: 1000 })).rejects.toBeInstanceOf(
      MediaTooLargeError,
    );
    await expect(downloadFile({ url: `${base}/chunked-big`, dest, maxBytes: 2500 })).rejects.toThrow(/limit/);
    expect(await readdir(join(dir, "media")).catch(() => [])).toEqual([]);
    await expect(downloadFile({ url: `${base}/missing`, dest, maxBytes: 100 })).rejects.toThrow(/HTTP 404/);
  });
});
