/**
 * The web chat's API against a real gateway: who gets in (token, cookie, Bearer), what another
 * site cannot do (post), the limits, and the 401 page a browser sees.
 */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { ConversationSummary, Me } from "../../../src/channels/web/protocol.js";
import { TOKEN, WebRig } from "./harness.js";

let rig: WebRig;
beforeEach(async () => {
  rig = await WebRig.start({ channels: { maxMediaBytes: 1000 } });
});
afterEach(async () => {
  await rig.close();
});

describe("web chat access", () => {
  it("answers 401 without the token or with a wrong one, and lets the Bearer token in", async () => {
    expect((await rig.request("/api/me")).status).toBe(401);
    const wrong = await rig.request("/api/me", { headers: { authorization: "Bearer not-the-token" } });
    expect(wrong.status).toBe(401);
    expect(wrong.json<{ error: string }>().error).toMatch(/token/);

    const me = await rig.request("/api/me", { headers: rig.bearer() });
    expect(me.status).toBe(200);
    expect(me.json<Me>()).toMatchObject({ model: "fake-model", limits: { uploadBytes: 1000 } });
  });

  it("trades the token for an HttpOnly, SameSite=Strict cookie that is not the token", async () => {
    const wrong = await rig.post("/api/login", { token: "nope" });
    expect(wrong.status).toBe(401);
    expect(wrong.headers["set-cookie"]).toBeUndefined();

    const ok = await rig.post("/api/login", { token: TOKEN });
    expect(ok.status).toBe(204);
    const cookie = String(ok.headers["set-cookie"]?.[0]);
    expect(cookie).toMatch(/^palaver_web=/);
    expect(cookie).toMatch(/; HttpOnly/);
    expect(cookie).toMatch(/; SameSite=Strict/);
    expect(cookie).not.toContain(TOKEN);

    const me = await rig.request("/api/me", { headers: { cookie: cookie.split(";")[0]! } });
    expect(me.status).toBe(200);
    const forged = await rig.request("/api/me", { headers: { cookie: "palaver_web=forged" } });
    expect(forged.status).toBe(401);
  });

  it("shows a browser opening an API address without the token a page saying where the token is", async () => {
    const page = await rig.request("/api/conversations", {
      headers: { accept: "text/html", "sec-fetch-mode": "navigate" },
    });
    expect(page.status).toBe(401);
    expect(page.headers["content-type"]).toMatch(/^text\/html/);
    expect(page.body).toContain("web/token");
    expect(page.body).toContain("channels.web.token");
    expect(page.body).not.toMatch(/<script/i);
    expect(page.headers["content-security-policy"]).toContain("script-src 'self'");
  });

  it("puts the strict security headers on every response, the public page shell included", async () => {
    for (const path of ["/", "/api/me", "/nothing-here"]) {
      const reply = await rig.request(path);
      expect(reply.headers["content-security-policy"]).toBe(
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; " +
          "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'",
      );
      expect(reply.headers["x-content-type-options"]).toBe("nosniff");
      expect(reply.headers["referrer-policy"]).toBe("no-referrer");
    }
    // The health endpoints stay as they were: open, for supervisors.
    expect((await rig.request("/healthz")).status).toBe(200);
  });

  it("answers only to a loopback name when bound to loopback (no DNS rebinding)", async () => {
    const reply = await rig.request("/", { headers: { host: "attacker.example:18790" } });
    expect(reply.status).toBe(421);
  });
});

describe("web chat CSRF", () => {
  it("refuses a POST from another origin, or with no origin, even with the cookie", async () => {
    const cookie = await rig.login();
    const evil = await rig.post("/api/conversations", {}, { ...cookie, origin: "http://evil.example" });
    expect(evil.status).toBe(403);
    const bare = await rig.request("/api/conversations", { method: "POST", headers: cookie });
    expect(bare.status).toBe(403);
    const login = await rig.post("/api/login", { token: TOKEN }, { origin: "http://evil.example" });
    expect(login.status).toBe(403);

    const same = await rig.post("/api/conversations", {}, cookie);
    expect(same.status).toBe(201);
    expect(same.json<ConversationSummary>().id).toMatch(/^[a-z0-9]{12}$/);
    // The Bearer header cannot be sent by another site's page: it is enough on its own.
    const bearer = await rig.request("/api/conversations", { method: "POST", headers: rig.bearer() });
    expect(bearer.status).toBe(201);
  });
});

describe("web chat limits", () => {
  it("refuses a JSON body over 64 KB, a message over the length limit and an upload over the size limit", async () => {
    const big = await rig.post(
      "/api/conversations/abc/messages",
      { text: "x".repeat(70 * 1024) },
      rig.bearer(),
    );
    expect(big.status).toBe(413);
    const long = await rig.post(
      "/api/conversations/abc/messages",
      { text: "x".repeat(40_000) },
      rig.bearer(),
    );
    expect(long.status).toBe(413);
    expect(long.json<{ error: string }>().error).toMatch(/at most 32000 characters/);
    const upload = await rig.request("/api/uploads?name=big.bin", {
      method: "POST",
      headers: rig.bearer(),
      body: Buffer.alloc(2000),
    });
    expect(upload.status).toBe(413);
    expect(rig.fake.requests).toHaveLength(0);
  });

  it("refuses a malformed conversation id and an empty message", async () => {
    expect((await rig.post("/api/conversations/NOT_OK/messages", { text: "hi" }, rig.bearer())).status).toBe(
      400,
    );
    expect((await rig.post("/api/conversations/abc/messages", { text: "  " }, rig.bearer())).status).toBe(
      400,
    );
  });
});
