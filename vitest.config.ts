import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["tests/**/*.test.ts"],
    // dist/ rebuilt when a source is newer: the child-process tests run the build.
    globalSetup: ["tests/global-setup.ts"],
    // Generous on purpose: tests wait for events, never for time, so a limit
    // only ends a test that hangs. Several tests run CLI or gateway children
    // (tests/helpers/cli.ts, each limited to 60 s), which on a loaded 2-core
    // machine take many seconds to start; 20 s was hit under load.
    testTimeout: 90_000,
    hookTimeout: 60_000,
    // Workers stay at vitest's default (CPUs - 1, so one file at a time on 2
    // cores): the load came from children started inside one file, which
    // tests/helpers/cli.ts now runs two at a time.
    // Tests must never touch the network or a real home folder.
    env: { PALAVER_LOG_LEVEL: process.env.PALAVER_LOG_LEVEL ?? "silent" },
  },
});
