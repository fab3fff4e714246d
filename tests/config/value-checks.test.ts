import { describe, expect, it } from "vitest";
import { apiBaseProblem, isPlaceholderKey } from "../../src/config/value-checks.js";
import { didYouMean } from "../../src/util/did-you-mean.js";

describe("isPlaceholderKey", () => {
  it("knows the placeholders people copy from examples", () => {
    for (const key of [
      "sk-...",
      "sk-or-...",
      " sk-… ",
      "<your key>",
      "your-api-key",
      "YOUR_API_KEY",
      "sk-xxxx",
    ]) {
      expect(isPlaceholderKey(key), key).toBe(true);
    }
  });

  it("never takes a real-looking key for one", () => {
    for (const key of ["", "sk-proj-AbC123xyz", "sk-ant-api03-Zx_xxa9", "gsk_4f3e", "AIzaSyB-x", "ollama"]) {
      expect(isPlaceholderKey(key), key).toBe(false);
    }
  });
});

describe("apiBaseProblem", () => {
  it("accepts http(s) URLs and blank (unset)", () => {
    for (const base of ["http://127.0.0.1:11434/v1", "https://api.example.com/v1/", "", "  "]) {
      expect(apiBaseProblem(base), base).toBeUndefined();
    }
  });

  it("says what to write when the scheme is missing, and refuses other schemes", () => {
    expect(apiBaseProblem("localhost:11434/v1")).toBe(
      '"localhost:11434/v1" has no scheme: write "http://localhost:11434/v1" (or https://)',
    );
    expect(apiBaseProblem("api.example.com/v1")).toContain('write "http://api.example.com/v1"');
    expect(apiBaseProblem("ftp://files.example.com")).toBe(
      '"ftp://files.example.com" is not an http(s) URL (expected http(s)://host/path)',
    );
  });
});

describe("didYouMean", () => {
  it("finds a near name and stays quiet for an unrelated one", () => {
    expect(didYouMean("olama", ["openai", "ollama", "vllm"])).toBe("ollama");
    expect(didYouMean("maxToken", ["model", "maxTokens", "temperature"])).toBe("maxTokens");
    expect(didYouMean("temprature", ["maxTokens", "temperature"])).toBe("temperature");
    expect(didYouMean("opnaei", ["openai"])).toBe("openai");
    expect(didYouMean("sillyKnob", ["model", "maxTokens", "temperature"])).toBeUndefined();
    expect(didYouMean("abc", ["xyz"])).toBeUndefined();
  });
});
