import { describe, expect, it } from "vitest";
import { maskSecrets, secretValues } from "../../src/config/secrets.js";
import { ConfigSchema } from "../../src/config/schema.js";

function sampleConfig() {
  return ConfigSchema.parse({
    providers: {
      openai: {
        apiKey: "sk-openai-1234567890abcd",
        extraHeaders: { "X-Title": "palaver-app", Auth: "Bearer zzzz9999" },
      },
      empty: { apiKey: "" },
      short: { apiKey: "abc12" },
    },
    channels: {
      telegram: { token: "123456:telegram-token-WXYZ" },
      slack: { botToken: "xoxb-slack-bot-0001", appToken: "", signingSecret: "signing-secret-5678" },
    },
    tools: {
      web: { search: { apiKey: "brave-key-4321" } },
      mcpServers: {
        gh: {
          command: "npx",
          env: { GITHUB_TOKEN: "ghp_mcp_token_7777", LOG_LEVEL: "debug" },
          headers: { "X-Api-Key": "mcp-header-8888" },
        },
      },
    },
  });
}

describe("maskSecrets", () => {
  it("masks keys, tokens, secrets and every header value, keeping the last 4 characters", () => {
    const config = sampleConfig();
    const masked = maskSecrets(config);
    expect(masked.providers.openai).toEqual({
      apiKey: "****abcd",
      apiBase: null,
      extraHeaders: { "X-Title": "****-app", Auth: "****9999" },
    });
    expect(masked.providers.empty!.apiKey).toBe("(not set)");
    // Too short to show any of it.
    expect(masked.providers.short!.apiKey).toBe("****");
    expect(masked.channels.telegram.token).toBe("****WXYZ");
    expect(masked.channels.slack.botToken).toBe("****0001");
    expect(masked.channels.slack.appToken).toBe("(not set)");
    expect(masked.channels.slack.signingSecret).toBe("****5678");
    expect(masked.tools.web.search.apiKey).toBe("****4321");
    // Every env value is a secret, whatever its name looks like (issue 11: a token under GH_PAT was shown).
    expect(masked.tools.mcpServers.gh!.env).toEqual({ GITHUB_TOKEN: "****7777", LOG_LEVEL: "****" });
    expect(masked.tools.mcpServers.gh!.headers).toEqual({ "X-Api-Key": "****8888" });
  });

  it("leaves everything else alone and does not modify its input", () => {
    const config = sampleConfig();
    const before = JSON.stringify(config);
    const masked = maskSecrets(config);
    expect(JSON.stringify(config)).toBe(before);
    expect(masked.agents.defaults.maxTokens).toBe(8192); // "maxTokens" is not a token
    expect(masked.agents.defaults.model).toBe(config.agents.defaults.model);
    expect(masked.channels.slack.reactEmoji).toBe("eyes");
    expect(masked.tools.mcpServers.gh!.command).toBe("npx");
    const text = JSON.stringify(masked);
    for (const secret of secretValues(config)) expect(text).not.toContain(secret);
  });
});

describe("secretValues", () => {
  it("lists every non-empty secret once", () => {
    expect(secretValues(sampleConfig()).sort()).toEqual(
      [
        "sk-openai-1234567890abcd",
        "palaver-app",
        "Bearer zzzz9999",
        "abc12",
        "123456:telegram-token-WXYZ",
        "xoxb-slack-bot-0001",
        "signing-secret-5678",
        "brave-key-4321",
        "ghp_mcp_token_7777",
        "mcp-header-8888",
        "debug",
      ].sort(),
    );
  });
});

describe("URL credentials (issue 11)", () => {
  function withUrls() {
    return ConfigSchema.parse({
      providers: { openai: { apiKey: "sk-openai-1234567890abcd", apiBase: "https://llm.example/v1" } },
      channels: { telegram: { proxy: "http://proxyuser:pr0xy-pa55@proxy.example:3128" } },
      tools: {
        web: { proxy: "socks5://alice:s3cret@127.0.0.1:1080" },
        mcpServers: {
          remote: { url: "https://ghp_urltoken123@mcp.example/sse" },
          local: { command: "npx", env: { GH_PAT: "ghp_not-a-secret-looking-name", MODE: "production" } },
        },
      },
    });
  }

  it("masks passwords in every URL, and user names that stand alone (tokens)", () => {
    const masked = maskSecrets(withUrls());
    expect(masked.channels.telegram.proxy).toBe("http://proxyuser:****@proxy.example:3128");
    expect(masked.tools.web.proxy).toBe("socks5://alice:****@127.0.0.1:1080");
    expect(masked.tools.mcpServers.remote!.url).toBe("https://****@mcp.example/sse");
    expect(masked.providers.openai!.apiBase).toBe("https://llm.example/v1");
    expect(masked.tools.mcpServers.local!.env).toEqual({ GH_PAT: "****name", MODE: "****tion" });
    const text = JSON.stringify(masked);
    for (const secret of ["pr0xy-pa55", "s3cret", "ghp_urltoken123", "ghp_not-a-secret", "production"]) {
      expect(text).not.toContain(secret);
    }
  });

  it("lists URL credentials and env values among the secret values (for the log redactor)", () => {
    const values = secretValues(withUrls());
    expect(values).toEqual(
      expect.arrayContaining(["pr0xy-pa55", "s3cret", "ghp_urltoken123", "ghp_not-a-secret-looking-name"]),
    );
    expect(values).not.toContain("proxyuser");
  });

  it("masks a password even when its @ is not percent-encoded", () => {
    const config = ConfigSchema.parse({
      tools: { web: { proxy: "http://bob:p@ss:word@proxy.example:8080" } },
    });
    expect(maskSecrets(config).tools.web.proxy).toBe("http://bob:****@proxy.example:8080");
    expect(secretValues(config)).toContain("p@ss:word");
  });
});
