/** What the service's environment lacks compared with the shell's, and writing it into a .env. */
import { chown, mkdir, mkdtemp, readFile, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parse as parseDotenv } from "dotenv";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { copyIntoStateEnv, dotenvLine, planServiceEnv } from "../../src/cli/service-env.js";

describe("dotenvLine", () => {
  it("writes values dotenv reads back exactly", () => {
    for (const value of ["sk-abc", "", "a b", "x #y", "it's", 'say "hi"', "a\\nb", "two\nlines", " pad "]) {
      const line = dotenvLine("K", value);
      expect(parseDotenv(line).K, line).toBe(value);
    }
    expect(dotenvLine("K", "sk-abc")).toBe("K=sk-abc");
  });

  it("refuses a value no quoting can hold", () => {
    expect(() => dotenvLine("K", "'\"`\n#")).toThrow(/cannot copy K/);
  });
});

describe("planServiceEnv", () => {
  let dir: string;
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), "palaver-service-env-"));
    await mkdir(join(dir, "state"));
    await mkdir(join(dir, "cwd"));
  });
  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it("copies what only the cwd .env has; the state folder's wins; shell-only overrides are named", async () => {
    await writeFile(join(dir, "state", ".env"), "A=state\n");
    await writeFile(join(dir, "cwd", ".env"), "A=cwd\nB=cwd\n");
    const plan = planServiceEnv({
      stateDir: join(dir, "state"),
      cwd: join(dir, "cwd"),
      shellEnv: { PALAVER_X__Y: "1", PALAVER_LOG_LEVEL: "debug", B: "shell", HOME: "/h" },
    });
    expect(plan.toCopy).toEqual({ B: "cwd" });
    expect(plan.serviceEnv).toEqual({ A: "state", B: "cwd" });
    expect(plan.shellOnly).toEqual(["PALAVER_X__Y"]);
    expect(plan.cwdEnvFile).toBe(join(dir, "cwd", ".env"));
  });

  it("run from the state folder itself, there is nothing to copy", async () => {
    await writeFile(join(dir, "state", ".env"), "A=state\n");
    const plan = planServiceEnv({ stateDir: join(dir, "state"), cwd: join(dir, "state"), shellEnv: {} });
    expect(plan.cwdEnvFile).toBeUndefined();
    expect(plan.toCopy).toEqual({});
    expect(plan.serviceEnv).toEqual({ A: "state" });
  });

  // As root (sudo palaver service install), the copy must stay readable by the service account.
  it.runIf(process.getuid?.() === 0)("root gives the copied .env to the state folder's owner", async () => {
    const state = join(dir, "state");
    await chown(state, 65534, 65534);
    await writeFile(join(dir, "cwd", ".env"), "B=cwd\n");
    const plan = planServiceEnv({ stateDir: state, cwd: join(dir, "cwd"), shellEnv: {} });
    await copyIntoStateEnv(plan);
    const info = await stat(join(state, ".env"));
    expect([info.uid, info.gid, info.mode & 0o777]).toEqual([65534, 65534, 0o600]);
    expect(parseDotenv(await readFile(join(state, ".env"), "utf8"))).toEqual({ B: "cwd" });
  });
});
