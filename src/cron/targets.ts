/**
 * Where a job's reply can go, checked when the job is added, and which
 * process runs which jobs: the gateway runs every job but the terminal's,
 * and `palaver chat` runs the jobs of its own terminal chat while it is open
 * (the gateway has no terminal to print them in).
 */
import { TERMINAL_CHANNEL } from "../bus/types.js";
import type { Config } from "../config/schema.js";
import { deliveryTarget, type CronJob } from "./types.js";

export type TargetCheck =
  | { ok: false; error: string }
  /** `notEnabled`: the platform is configured but off, so the replies would wait (the CLI asks first). */
  | { ok: true; note?: string; notEnabled?: true };

/** The chat platforms the config has a section for (telegram, slack, discord ...). */
export function configuredPlatforms(config: Pick<Config, "channels">): string[] {
  return Object.entries(config.channels as Record<string, unknown>)
    .filter(([, section]) => isPlatformSection(section))
    .map(([name]) => name);
}

/**
 * Whether a job for `channel`:`chatId` can be delivered: a channel the config does not know (a typo)
 * is refused, naming the ones that exist; one that is configured but not enabled is accepted with a
 * warning; the terminal is accepted with a note on when its replies show.
 */
export function checkTarget(config: Pick<Config, "channels">, channel: string, chatId: string): TargetCheck {
  if (channel === TERMINAL_CHANNEL) return { ok: true, note: terminalNote(chatId) };
  const section = (config.channels as Record<string, unknown>)[channel];
  if (!isPlatformSection(section)) {
    const known = [...configuredPlatforms(config), TERMINAL_CHANNEL].join(", ");
    return { ok: false, error: `unknown channel "${channel}": the channels are ${known}` };
  }
  if (!section.enabled) {
    return {
      ok: true,
      notEnabled: true,
      note:
        `warning: channels.${channel} is not enabled, so this job's replies wait (kept by the gateway) ` +
        `until it is (set channels.${channel}.enabled and reload the gateway)`,
    };
  }
  return { ok: true };
}

/** Where a web-chat user's reminders go instead, for whoever adds a job from the shell. */
export const WEB_CHAT_HINT =
  "for the web chat, use --channel web --to <conversation id> (the part after #c= in the web chat's address), " +
  "or ask the assistant there to set the reminder";

/** What the person who sets a reminder in the terminal is told about where it goes. */
export function terminalNote(chatId: string): string {
  const command = chatId === "direct" ? "palaver chat" : `palaver chat -s ${chatId}`;
  return (
    `it fires in this terminal chat while \`${command}\` is open; if it is closed at that time, ` +
    `it is shown the next time you open \`${command}\` (the gateway cannot write to a terminal)`
  );
}

/** The jobs the gateway runs: all but the terminal's. */
export function gatewayJobs(job: CronJob): boolean {
  return deliveryTarget(job.payload)?.channel !== TERMINAL_CHANNEL;
}

/** The jobs `palaver chat -s <chatId>` runs while it is open: those of its own terminal chat. */
export function terminalJobs(chatId: string): (job: CronJob) => boolean {
  return (job) => {
    const target = deliveryTarget(job.payload);
    return target?.channel === TERMINAL_CHANNEL && target.chatId === chatId;
  };
}

function isPlatformSection(section: unknown): section is { enabled: boolean } {
  return (
    section !== null &&
    typeof section === "object" &&
    typeof (section as { enabled?: unknown }).enabled === "boolean"
  );
}
