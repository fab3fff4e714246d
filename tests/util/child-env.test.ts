import { describe, expect, it } from "vitest";
import { childEnv } from "../../src/util/child-env.js";

describe("childEnv (the allow-list for exec commands and MCP stdio servers)", () => {
  const base = {
    PATH: "/usr/bin:/bin",
    HOME: "/home/ann",
    LANG: "de_DE.UTF-8",
    LC_ALL: "C.UTF-8",
    LC_TIME: "en_GB.UTF-8",
    TZ: "Europe/Berlin",
    TERM: "xterm",
    OPENAI_API_KEY: "sk-secret",
    BRAVE_API_KEY: "brave-secret",
    PALAVER_CHANNELS__TELEGRAM__TOKEN: "123:abc",
    AWS_SECRET_ACCESS_KEY: "aws",
    USER: "ann",
    SHELL: "/bin/bash",
    NOTIFY_SOCKET: "/run/systemd/notify",
    LCX: "not a locale",
  };

  it("passes PATH, HOME, LANG, LC_*, TZ and TERM, and nothing else", () => {
    expect(childEnv(base)).toEqual({
      PATH: "/usr/bin:/bin",
      HOME: "/home/ann",
      LANG: "de_DE.UTF-8",
      LC_ALL: "C.UTF-8",
      LC_TIME: "en_GB.UTF-8",
      TZ: "Europe/Berlin",
      TERM: "xterm",
    });
  });

  it("appends pathAppend, replaces HOME, and adds the user's own list last", () => {
    const env = childEnv(base, {
      pathAppend: "/opt/tools/bin",
      home: "/srv/ws",
      extra: { GITHUB_TOKEN: "listed-on-purpose", TZ: "UTC" },
    });
    expect(env.PATH).toBe("/usr/bin:/bin:/opt/tools/bin");
    expect(env.HOME).toBe("/srv/ws");
    expect(env.GITHUB_TOKEN).toBe("listed-on-purpose");
    expect(env.TZ).toBe("UTC");
    expect(childEnv({}, { pathAppend: "/x" }).PATH).toBe("/x");
  });

  it("drops exported shell functions", () => {
    expect(childEnv({ TERM: "() { :; }; echo pwned" })).toEqual({});
  });
});
