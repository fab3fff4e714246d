import { DiscordAPIError } from "discord.js";
import { describe, expect, it } from "vitest";
import {
  describeCloseCode,
  describeConnectError,
  intentWarnings,
} from "../../../src/channels/discord/diagnostics.js";

describe("Discord diagnostics", () => {
  it("explains a bad token, from the REST API (401) or from the gateway (4004)", () => {
    const rest = new DiscordAPIError({ code: 0, message: "401: Unauthorized" }, 0, 401, "GET", "u", {});
    expect(describeConnectError(rest, null, "")).toMatch(
      /rejected the bot token.*channels\.discord\.token.*HTTP 401/,
    );
    expect(describeConnectError(new Error("Authentication failed"), 4004, "")).toMatch(/token.*4004/);
    expect(describeConnectError(new Error("Authentication failed"), null, "")).toMatch(/token.*4004/);
  });

  it("explains the missing Message Content intent (4014) with the fix", () => {
    const text = describeConnectError(new Error("Used disallowed intents"), 4014, "");
    expect(text).toMatch(/Message Content/);
    expect(text).toMatch(/Privileged Gateway Intents/);
    expect(describeConnectError(new Error("Used disallowed intents"), null, "")).toBe(text);
    expect(describeCloseCode(4000)).toBeNull();
  });

  it("names the server it could not reach, and passes anything else through", () => {
    const refused = new Error("fetch failed", {
      cause: Object.assign(new Error("x"), { code: "ECONNREFUSED" }),
    });
    expect(describeConnectError(refused, null, "http://127.0.0.1:9/api")).toBe(
      "Could not reach Discord at http://127.0.0.1:9/api (ECONNREFUSED); will retry.",
    );
    expect(describeConnectError(new Error("boom"), null, "")).toBe("Could not connect to Discord: boom");
  });

  it("warns about intents that leave the bot deaf", () => {
    expect(intentWarnings(37377)).toEqual([]);
    expect(intentWarnings(37377 - 32768)).toEqual([expect.stringMatching(/MessageContent/)]);
    expect(intentWarnings(0)).toHaveLength(4);
  });
});
