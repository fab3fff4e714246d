import { describe, expect, it } from "vitest";
import { maskSecrets, secretValues } from "../../src/config/load.js";
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
    expect(masked.tools.mcpServers.gh!.env).toEqual({ GITHUB_TOKEN: "****7777", LOG_LEVEL: "debug" });
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
      ].sort(),
    );
  });
});
