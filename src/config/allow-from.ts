/**
 * A channel's allowFrom as the config has it: what the message tool and the
 * cron scheduler check against when nobody is in front of them (the channel
 * manager checks live messages itself). Undefined when the config has no
 * section of that name (the terminal's "cli", a typo in a tool call).
 */
import { TERMINAL_CHANNEL, type InboundMessage } from "../bus/types.js";
import { DM_POLICIES, type DmPolicy } from "./platforms/common.js";
import type { Config } from "./schema.js";

export function allowFromOf(
  config: Pick<Config, "channels">,
  channel: string,
): readonly string[] | undefined {
  const section: unknown = (config.channels as Record<string, unknown>)[channel];
  if (section === null || typeof section !== "object") return undefined;
  const list = (section as { allowFrom?: unknown }).allowFrom;
  return Array.isArray(list) ? list.filter((id): id is string => typeof id === "string") : undefined;
}

/** A channel's admins (who may answer any approval prompt there); none without a config section. */
export function adminsOf(config: Pick<Config, "channels">, channel: string): readonly string[] {
  const section: unknown = (config.channels as Record<string, unknown>)[channel];
  if (section === null || typeof section !== "object") return [];
  const list = (section as { admins?: unknown }).admins;
  return Array.isArray(list) ? list.filter((id): id is string => typeof id === "string") : [];
}

/**
 * A channel's dmPolicy (who besides allowFrom may write in direct messages); undefined without a
 * config section or a policy (the terminal), which means allowFrom alone.
 */
export function dmPolicyOf(config: Pick<Config, "channels">, channel: string): DmPolicy | undefined {
  const section: unknown = (config.channels as Record<string, unknown>)[channel];
  if (section === null || typeof section !== "object") return undefined;
  const policy = (section as { dmPolicy?: unknown }).dmPolicy;
  return DM_POLICIES.find((p) => p === policy);
}

/**
 * Whether a sender known by id and aliases is on `allowFrom`: "*" lets everybody in, an empty list
 * nobody; an alias may be written with or without its "@". The one rule every check uses (channels'
 * live messages through channels/access.ts, a cron job's creator, approval answers).
 */
export function isSenderAllowed(
  senderId: string,
  aliases: readonly string[],
  allowFrom: readonly string[],
): boolean {
  if (allowFrom.includes("*")) return true;
  return [senderId, ...aliases].some(
    (id) => allowFrom.includes(id) || allowFrom.includes(id.replace(/^@/, "")),
  );
}

/**
 * An owner of the bot on a channel: named in the config's allowFrom or admins there (the wildcard
 * makes nobody one). People let in by a pairing code may talk to the bot but are not owners, which
 * is why this reads the config and not the gateway's allow list. The person at the terminal
 * (`palaver chat`) is one: they can read the state folder anyway. The one rule for /pairing, /agent,
 * /usage, /memory undo and the budget's warnings.
 */
export function isOwner(
  config: Pick<Config, "channels">,
  sender: Pick<InboundMessage, "channel" | "senderId" | "senderAliases">,
): boolean {
  if (sender.channel === TERMINAL_CHANNEL) return true;
  const owners = [...(allowFromOf(config, sender.channel) ?? []), ...adminsOf(config, sender.channel)].filter(
    (id) => id !== "*",
  );
  return isSenderAllowed(sender.senderId, sender.senderAliases ?? [], owners);
}
