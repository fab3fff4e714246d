import { describe, expect, it } from "vitest";
import { expandEnvRecord, expandEnvRefs } from "../../src/util/expand-env.js";

describe("expandEnvRefs", () => {
  it("replaces ${NAME} with the variable and reports missing ones once, as empty text", () => {
    const env = { TOKEN: "t0k", USER_NAME: "ann" };
    expect(expandEnvRefs("Bearer ${TOKEN}", env)).toEqual({ value: "Bearer t0k", missing: [] });
    expect(expandEnvRefs("${USER_NAME}-${NOPE}-${NOPE}-${ALSO_NOPE}", env)).toEqual({
      value: "ann---",
      missing: ["NOPE", "ALSO_NOPE"],
    });
  });

  it("keeps what is not a ${NAME} reference as written", () => {
    const env = { A: "x" };
    expect(expandEnvRefs("$A ${1A} ${A B} $${A} {A}", env).value).toBe("$A ${1A} ${A B} $x {A}");
    expect(expandEnvRefs("an empty value: [${E}]", { E: "" })).toEqual({
      value: "an empty value: []",
      missing: [],
    });
  });
});

describe("expandEnvRecord", () => {
  it("expands every value, keeps the keys, and collects missing names across values", () => {
    const out = expandEnvRecord(
      { Authorization: "Bearer ${KEY}", "X-A": "${MISSING}", __proto__x: "${MISSING}" },
      {
        KEY: "k",
      },
    );
    expect(out.value).toEqual({ Authorization: "Bearer k", "X-A": "", __proto__x: "" });
    expect(out.missing).toEqual(["MISSING"]);
  });
});
