import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["tests/**/*.test.ts"],
    testTimeout: 20_000,
    hookTimeout: 20_000,
    // Tests must never touch the network or a real home folder.
    env: { PALAVER_LOG_LEVEL: process.env.PALAVER_LOG_LEVEL ?? "silent" },
  },
});
