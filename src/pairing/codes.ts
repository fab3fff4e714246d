/**
 * Pairing codes: what a stranger is given to pass on to the owner. Pure but for the random source.
 *
 * 8 characters from 30 that cannot be mistaken for one another when read aloud or retyped from a
 * phone (no 0/O, 1/I/L, and no U, which reads as V in some fonts): 30^8 ≈ 6.6e11 codes, and at most
 * ten are open per platform for an hour, so guessing one is hopeless.
 */
import { randomInt } from "node:crypto";

export const CODE_ALPHABET = "23456789ABCDEFGHJKMNPQRSTVWXYZ";
export const CODE_LENGTH = 8;

/** A fresh code, each character drawn uniformly (randomInt has no modulo bias). */
export function newPairingCode(random: (max: number) => number = randomInt): string {
  let code = "";
  for (let i = 0; i < CODE_LENGTH; i++) code += CODE_ALPHABET[random(CODE_ALPHABET.length)];
  return code;
}

/**
 * What the owner typed, as a code: case, spaces and dashes do not matter ("abcd-efgh" is
 * ABCDEFGH). Null when it cannot be a code at all, so the caller can say so instead of "unknown".
 */
export function normalizeCode(input: string): string | null {
  const code = input.replace(/[\s-]/g, "").toUpperCase();
  if (code.length !== CODE_LENGTH) return null;
  return [...code].every((c) => CODE_ALPHABET.includes(c)) ? code : null;
}
