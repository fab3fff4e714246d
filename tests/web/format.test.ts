/** The page's pure helpers (web/src/format.ts), outside the browser. */
import { describe, expect, it } from "vitest";
import { conversationFromHash, formatAge, formatBytes, tokenFromHash } from "../../web/src/format.js";

describe("the page's fragment", () => {
  it("gives the token, alone or beside a conversation", () => {
    expect(tokenFromHash("#token=abc_DEF-123")).toBe("abc_DEF-123");
    expect(tokenFromHash("#c=x1&token=t")).toBe("t");
    expect(tokenFromHash("#c=x1")).toBeUndefined();
    expect(tokenFromHash("")).toBeUndefined();
  });

  it("gives the conversation only when it is a valid id", () => {
    expect(conversationFromHash("#c=abc123")).toBe("abc123");
    expect(conversationFromHash("#c=ABC")).toBeUndefined();
    expect(conversationFromHash("#c=a/../b")).toBeUndefined();
    expect(conversationFromHash(`#c=${"a".repeat(33)}`)).toBeUndefined();
    expect(conversationFromHash("#token=x")).toBeUndefined();
  });
});

describe("sizes and ages", () => {
  it("formats sizes", () => {
    expect(formatBytes(512)).toBe("512 B");
    expect(formatBytes(1536)).toBe("1.5 KB");
    expect(formatBytes(200 * 1024)).toBe("200 KB");
    expect(formatBytes(3 * 1024 * 1024)).toBe("3.0 MB");
  });

  it("formats ages from now", () => {
    const now = Date.parse("2026-01-02T12:00:00Z");
    expect(formatAge("2026-01-02T11:59:30Z", now)).toBe("just now");
    expect(formatAge("2026-01-02T11:55:00Z", now)).toBe("5 min ago");
    expect(formatAge("2026-01-02T09:00:00Z", now)).toBe("3 h ago");
    expect(formatAge("not a date", now)).toBe("");
  });
});
