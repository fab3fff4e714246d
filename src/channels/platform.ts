/**
 * What a platform folder provides (its index.ts descriptor) and what its
 * channel is built from. Apart from registry.ts, which lists the descriptors,
 * so a platform's files never import the list that imports them.
 */
import type { z } from "zod";
import type { Config } from "../config/schema.js";
import type { HttpMount } from "../daemon/health.js";
import type { Logger } from "../log.js";
import type { SessionStorage } from "../sessions/storage.js";
import type { IngressLease } from "./ingress-lease.js";
import type { Channel } from "./types.js";
import type { UsageAsker, UsageReport } from "../usage/command.js";
import type { SharedToken } from "./web/auth.js";
import type { WebRelay } from "./web/relay.js";

export interface ChannelFactoryContext {
  config: Config;
  workspace: string;
  log: Logger;
  /** What the gateway lends a channel served from its own process (the web chat); absent elsewhere. */
  gateway?: GatewayServices;
}

export interface GatewayServices {
  /** The gateway's HTTP server (daemon/health.ts): the paths health does not serve. */
  http: HttpMount;
  /** The agent's sessions, read for a conversation's history. */
  sessions: SessionStorage;
  /** The state folder (beside the config): where the web chat keeps its token. */
  stateDir: string;
  /** The model answering, for the page's header. */
  model: string;
  /** What /usage reports for `session` as `asker` may see it (the web chat's usage panel). */
  usageReport(asker: UsageAsker, session: string): UsageReport;
  /**
   * Cluster mode: a new lease of this name (channels/ingress-lease.ts INGRESS_LEASES), not yet
   * started, for an ingress only one instance may run (Telegram polling, Discord's gateway). The
   * channel starts and stops it with itself. Absent: one process, the ingress always runs.
   */
  lease?: (name: string) => IngressLease;
  /** Cluster mode: the web chat's events to and from the other instances (web/pg-relay.ts); absent in one process. */
  webRelay?: WebRelay;
  /** Cluster mode: the web token all instances agree on (web/pg-token.ts); absent: <state>/web/token alone. */
  webToken?: SharedToken;
}

export type ChannelFactory = (ctx: ChannelFactoryContext) => Promise<Channel>;

/** What a platform folder exports from its index.ts. */
export interface Platform<Name extends string = string, Section extends z.ZodType = z.ZodType> {
  /** The key under `channels` in the config, and the channel's name on the bus. */
  readonly name: Name;
  /** Its config section (the shape nanobot's config.json has). */
  readonly configSchema: Section;
  /**
   * What cannot work in an enabled section, in plain words starting with the
   * config path (empty: nothing known to be wrong). A platform with problems
   * is not started; `config check` and `status` report them.
   */
  problems(section: z.output<Section>): string[];
  /** Builds the channel; imports the adapter lazily so an unused SDK is never loaded. */
  create: ChannelFactory;
}
