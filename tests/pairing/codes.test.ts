import { describe, expect, it } from "vitest";
import { CODE_ALPHABET, CODE_LENGTH, newPairingCode, normalizeCode } from "../../src/pairing/codes.js";

describe("pairing codes", () => {
  it("are 8 characters from an alphabet without look-alikes", () => {
    for (const c of "01ILOU") expect(CODE_ALPHABET).not.toContain(c);
    expect(new Set(CODE_ALPHABET).size).toBe(CODE_ALPHABET.length);
    for (let i = 0; i < 200; i++) {
      const code = newPairingCode();
      expect(code).toHaveLength(CODE_LENGTH);
      expect([...code].every((c) => CODE_ALPHABET.includes(c))).toBe(true);
    }
  });

  it("draw every character from the random source", () => {
    expect(newPairingCode(() => 0)).toBe("22222222");
    expect(newPairingCode((max) => max - 1)).toBe("ZZZZZZZZ");
  });

  it("differ from one another (crypto random, not a counter)", () => {
    const codes = new Set(Array.from({ length: 500 }, () => newPairingCode()));
    expect(codes.size).toBe(500);
  });

  it("are read back whatever the case, spaces and dashes the owner typed", () => {
    expect(normalizeCode("k7m2-qx9b")).toBe("K7M2QX9B");
    expect(normalizeCode(" K7M2 QX9B ")).toBe("K7M2QX9B");
  });

  it("refuse what cannot be a code: wrong length or a look-alike character", () => {
    expect(normalizeCode("K7M2QX9")).toBeNull();
    expect(normalizeCode("K7M2QX9BB")).toBeNull();
    expect(normalizeCode("K7M2QX0B")).toBeNull(); // a zero, never in a code
    expect(normalizeCode("")).toBeNull();
  });
});
