import { describe, expect, it } from "vitest";
import { createEnabledChannels, type ChannelFactory } from "../../src/channels/registry.js";
import { ConfigSchema } from "../../src/config/schema.js";
import { TestChannel } from "../helpers/test-channel.js";
import { captureLog } from "../helpers/log.js";

describe("createEnabledChannels", () => {
  it("loads only enabled platforms, reports a missing adapter and survives a failing factory", async () => {
    const config = ConfigSchema.parse({
      channels: {
        telegram: { enabled: true, allowFrom: ["1"] },
        slack: { enabled: false },
        discord: { enabled: true, allowFrom: [] },
      },
    });
    const loaded: string[] = [];
    const factory =
      (name: string, fail = false): ChannelFactory =>
      async () => {
        loaded.push(name);
        if (fail) throw new Error("SDK failed to load");
        return new TestChannel(name);
      };
    const { log, lines } = captureLog();

    const channels = await createEnabledChannels(
      { config, workspace: "/tmp", log },
      { telegram: factory("telegram"), slack: factory("slack"), discord: factory("discord", true) },
    );

    expect(loaded).toEqual(["telegram", "discord"]); // slack is disabled: never loaded
    expect(channels.map((c) => [c.channel.name, c.allowFrom])).toEqual([["telegram", ["1"]]]);
    expect(lines.map((l) => l.msg)).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/channels\.discord\.allowFrom is empty/),
        expect.stringMatching(/channel discord could not be created/),
      ]),
    );

    const { log: log2, lines: lines2 } = captureLog();
    const none = await createEnabledChannels(
      { config, workspace: "/tmp", log: log2 },
      { telegram: undefined },
    );
    expect(none).toEqual([]);
    expect(lines2[0]!.msg).toMatch(/no telegram adapter/);
  });
});
