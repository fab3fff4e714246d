import { DiscordAPIError, HTTPError, RateLimitError } from "discord.js";
import { describe, expect, it } from "vitest";
import { classifyDiscordError } from "../../../src/channels/discord/errors.js";
import { ChannelError } from "../../../src/util/errors.js";

function apiError(code: number, status: number, message: string): DiscordAPIError {
  return new DiscordAPIError({ code, message }, code, status, "POST", "https://discord.test/api/v10/x", {});
}

describe("classifyDiscordError", () => {
  it.each([
    [50001, 403, "Missing Access"],
    [50007, 403, "Cannot send messages to this user"],
    [10003, 404, "Unknown Channel"],
    [10013, 404, "Unknown User"],
    [50013, 403, "Missing Permissions"],
  ])("code %i (%s) is permanent: retrying can never deliver", (code, status, message) => {
    const err = classifyDiscordError(apiError(code, status, message), "createMessage");
    expect(err).toMatchObject({ platform: "discord", method: "createMessage", code, permanent: true });
    expect(err.message).toContain(message);
  });

  it("other API errors, server errors and network errors are transient", () => {
    expect(classifyDiscordError(apiError(50035, 400, "Invalid Form Body"), "createMessage").permanent).toBe(
      false,
    );
    const server = classifyDiscordError(new HTTPError(502, "Bad Gateway", "POST", "u", {}), "createMessage");
    expect(server).toMatchObject({ code: 502, permanent: false });
    expect(classifyDiscordError(new Error("socket hang up"), "triggerTyping")).toMatchObject({
      method: "triggerTyping",
      permanent: false,
    });
  });

  it("a rate limit discord.js refused to wait out carries Discord's retry-after", () => {
    const limited = new RateLimitError({
      timeToReset: 30_050,
      limit: 5,
      method: "POST",
      hash: "h",
      url: "u",
      route: "/channels/:id/messages",
      majorParameter: "1",
      global: false,
      retryAfter: 30_050,
      sublimitTimeout: 0,
      scope: "user",
    });
    expect(classifyDiscordError(limited, "createMessage")).toMatchObject({
      code: 429,
      permanent: false,
      retryAfterMs: 30_050,
    });
  });

  it("passes a ChannelError through as it is", () => {
    const err = new ChannelError("Discord is not connected");
    expect(classifyDiscordError(err, "createMessage")).toBe(err);
  });
});
