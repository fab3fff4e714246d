/**
 * The web chat's limits per client, against a real gateway: wrong tokens (Bearer and login
 * together) lock out only the client that guessed, X-Forwarded-* count only behind a trusted proxy,
 * a message to a fresh conversation id is a new conversation, and uploads have a rate per client
 * and a quota of what is not yet sent.
 */
import { readdir } from "node:fs/promises";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import type { UploadResult } from "../../../src/channels/web/protocol.js";
import { waitFor } from "../../helpers/wait.js";
import { TOKEN, WebRig } from "./harness.js";

/** Another client on this machine: any 127.x.x.x address reaches the loopback server. */
const OTHER = "127.0.0.2";
const WRONG = { authorization: "Bearer not-the-token" };

let rig: WebRig | undefined;
afterEach(async () => {
  await rig?.close();
  rig = undefined;
});

function start(web: Record<string, unknown> = {}, channels: Record<string, unknown> = {}): Promise<WebRig> {
  return WebRig.start({ channels: { ...channels, web: { token: TOKEN, ...web } } });
}

async function guessBearer(r: WebRig, times: number, headers: Record<string, string> = {}, from = OTHER) {
  const statuses: number[] = [];
  for (let i = 0; i < times; i++) {
    const reply = await r.request("/api/me", { headers: { ...WRONG, ...headers }, localAddress: from });
    statuses.push(reply.status);
  }
  return statuses;
}

describe("wrong tokens", () => {
  it("refuses a client that tried ten wrong Bearer tokens, the right one included, and no other client", async () => {
    rig = await start();
    expect(await guessBearer(rig, 10)).toEqual(Array(10).fill(401));
    const locked = await rig.request("/api/me", { headers: WRONG, localAddress: OTHER });
    expect(locked.status).toBe(429);
    expect(locked.json<{ error: string }>().error).toMatch(/too many wrong tokens/);
    const right = await rig.request("/api/me", { headers: rig.bearer(), localAddress: OTHER });
    expect(right.status).toBe(429);

    expect((await rig.request("/api/me", { headers: rig.bearer() })).status).toBe(200);
    await rig.login();
  });

  it("counts wrong logins and wrong Bearer tokens together, per client: nobody can keep the owner's login at 429", async () => {
    rig = await start();
    expect(await guessBearer(rig, 5)).toEqual(Array(5).fill(401));
    for (let i = 0; i < 5; i++) {
      expect((await rig.post("/api/login", { token: "guess" }, {}, OTHER)).status).toBe(401);
    }
    expect((await rig.post("/api/login", { token: TOKEN }, {}, OTHER)).status).toBe(429);

    expect((await rig.post("/api/login", { token: "typo" })).status).toBe(401);
    await rig.login();
  });

  it("does not take the client's word for its address (X-Forwarded-For) without trustProxy", async () => {
    rig = await start();
    const statuses: number[] = [];
    for (let i = 0; i < 11; i++) {
      statuses.push(
        (await rig.request("/api/me", { headers: { ...WRONG, "x-forwarded-for": `10.0.0.${i}` } })).status,
      );
    }
    expect(statuses.slice(0, 10)).toEqual(Array(10).fill(401));
    expect(statuses[10]).toBe(429);
  });

  it("behind a trusted proxy, limits the address the proxy saw (the last X-Forwarded-For entry)", async () => {
    rig = await start({ trustProxy: true });
    const attacker = { "x-forwarded-for": "198.51.100.7" };
    expect(await guessBearer(rig, 10, attacker, "127.0.0.1")).toEqual(Array(10).fill(401));
    const spoofed = { ...WRONG, "x-forwarded-for": "203.0.113.5, 198.51.100.7" };
    expect((await rig.request("/api/me", { headers: spoofed })).status).toBe(429);
    const owner = { ...rig.bearer(), "x-forwarded-for": "203.0.113.5" };
    expect((await rig.request("/api/me", { headers: owner })).status).toBe(200);
  });
});

describe("channels.web.trustProxy", () => {
  const proxied = { origin: "https://chat.example.com", "x-forwarded-host": "chat.example.com" };

  it("off (the default): X-Forwarded-Host does not pass the same-origin check, X-Forwarded-Proto does not make the cookie Secure", async () => {
    rig = await start();
    const cookie = await rig.login();
    const forged = await rig.post("/api/conversations", {}, { ...cookie, ...proxied });
    expect(forged.status).toBe(403);
    const login = await rig.post("/api/login", { token: TOKEN }, { "x-forwarded-proto": "https" });
    expect(String(login.headers["set-cookie"]?.[0])).not.toMatch(/; Secure/);
  });

  it("on: a proxy's X-Forwarded-Host and -Proto are believed", async () => {
    rig = await start({ trustProxy: true });
    const cookie = await rig.login();
    expect((await rig.post("/api/conversations", {}, { ...cookie, ...proxied })).status).toBe(201);
    const login = await rig.post("/api/login", { token: TOKEN }, { "x-forwarded-proto": "https" });
    expect(String(login.headers["set-cookie"]?.[0])).toMatch(/; Secure/);
  });
});

describe("new conversations", () => {
  it("counts a message to an unknown conversation id as a new conversation", async () => {
    rig = await start();
    rig.fake.setHandler(() => ({ content: "ok" }));
    for (let i = 0; i < 30; i++) {
      const sent = await rig.post(`/api/conversations/fresh${i}/messages`, { text: "hi" }, rig.bearer());
      expect(sent.status).toBe(202);
    }
    const over = await rig.post("/api/conversations/fresh30/messages", { text: "hi" }, rig.bearer());
    expect(over.status).toBe(429);
    expect(over.json<{ error: string }>().error).toMatch(/new conversations a minute/);
    expect((await rig.request("/api/conversations", { method: "POST", headers: rig.bearer() })).status).toBe(
      429,
    );
    // A conversation already started is not a new one.
    expect(
      (await rig.post("/api/conversations/fresh0/messages", { text: "again" }, rig.bearer())).status,
    ).toBe(202);
    await waitFor(() => rig!.fake.requests.length === 31, undefined, "the 31 accepted messages' turns");
  });
});

describe("uploads", () => {
  function upload(r: WebRig, bytes: number, from?: string) {
    return r.request("/api/uploads?name=a.bin", {
      method: "POST",
      headers: r.bearer(),
      body: Buffer.alloc(bytes),
      ...(from ? { localAddress: from } : {}),
    });
  }

  it("takes at most channels.web.uploadsPerMinute uploads a minute from one client", async () => {
    rig = await start({ uploadsPerMinute: 3 });
    for (let i = 0; i < 3; i++) expect((await upload(rig, 10)).status).toBe(201);
    const over = await upload(rig, 10);
    expect(over.status).toBe(429);
    expect(over.json<{ error: string }>().error).toContain("channels.web.uploadsPerMinute");
    expect((await upload(rig, 10, OTHER)).status).toBe(201);
  });

  it("keeps at most channels.web.uploadQuotaBytes of uploads not yet sent; sending them frees the room", async () => {
    rig = await start({ uploadQuotaBytes: 2500 }, { maxMediaBytes: 1000 });
    const ids: string[] = [];
    for (let i = 0; i < 2; i++) {
      const reply = await upload(rig, 1000);
      expect(reply.status).toBe(201);
      ids.push(reply.json<UploadResult>().id);
    }
    const over = await upload(rig, 1000);
    expect(over.status).toBe(413);
    expect(over.json<{ error: string }>().error).toContain("channels.web.uploadQuotaBytes");
    const stored = await readdir(join(rig.dir, "ws", "media"), { recursive: true, withFileTypes: true });
    expect(stored.filter((e) => e.isFile())).toHaveLength(2);

    rig.fake.setHandler(() => ({ content: "got them" }));
    const sent = await rig.post(
      "/api/conversations/files/messages",
      { text: "see", uploads: ids },
      rig.bearer(),
    );
    expect(sent.status).toBe(202);
    expect((await upload(rig, 1000)).status).toBe(201);
    await waitFor(() => rig!.fake.requests.length === 1, undefined, "the message's turn");
  });
});
