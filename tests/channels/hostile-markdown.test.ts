/**
 * Replies are untrusted input (a fetched page can ask the model to repeat
 * anything), and every platform formatter runs on the event loop. Regression:
 * the heading and table-rule regexes of the Discord, Slack and Telegram
 * formatters backtracked cubically over runs of spaces: "#### a" plus 10,000
 * spaces held the event loop for four minutes, 4,000 spaces after a table
 * row for 15 s. Bounds are generous for loaded CI machines.
 */
import { describe, expect, it } from "vitest";
import { discordChunks } from "../../src/channels/discord/format.js";
import { formatSlackMessage } from "../../src/channels/slack/format.js";
import { formatForTelegram } from "../../src/channels/telegram/format.js";

const SPACES = " ".repeat(20_000);
const formatters: [string, (s: string) => string[]][] = [
  ["Discord", (s) => discordChunks(s)],
  ["Slack", (s) => formatSlackMessage(s)],
  ["Telegram", (s) => formatForTelegram(s).map((c) => c.html)],
];

describe.each(formatters)("%s formatting of hostile replies", (_platform, format) => {
  it.each([
    ["a heading followed by 20,000 spaces", `#### a${SPACES}x`],
    ["a table row followed by a line of 20,000 spaces", `| a | b |\n${SPACES}x`],
    ["a table row followed by '|' and 20,000 spaces", `| a | b |\n|${SPACES}x`],
  ])("formats %s quickly and keeps the text", (_shape, text) => {
    const started = performance.now();
    const out = format(text).join("\n");
    expect(performance.now() - started).toBeLessThan(2_000);
    expect(out).toContain("x");
  });
});
