/**
 * The Gateway the end-to-end contract suites (approvals, pairing) start: the platform's real
 * adapter (the rig) against its fake, the model behind FakeOpenAI, no heartbeat, an ephemeral
 * port. Each suite adds only what it is about (`channels`, `tools`).
 */
import { ConfigSchema } from "../../../src/config/schema.js";
import { Gateway } from "../../../src/gateway.js";
import { createProvider } from "../../../src/llm/openai-provider.js";
import type { FakeOpenAI } from "../../fakes/openai-server.js";
import { captureLog } from "../../helpers/log.js";
import type { PlatformDriver, PlatformRig } from "./driver.js";

export interface RigGatewayOptions {
  driver: PlatformDriver;
  rig: PlatformRig;
  llm: FakeOpenAI;
  workspace: string;
  /** Where the config is said to live (the state folder is beside it). */
  configPath: string;
  /** More `channels` keys (the platform's section, with allowFrom the rig's sender, is always there). */
  channels?: Record<string, unknown>;
  tools?: Record<string, unknown>;
}

/** Builds and starts the gateway; the caller stops it (`gateway.stop(1000)`). */
export async function startRigGateway(opts: RigGatewayOptions): Promise<Gateway> {
  const { driver, rig, llm, workspace } = opts;
  const config = ConfigSchema.parse({
    agents: { defaults: { workspace, provider: "custom", model: "fake-model" } },
    providers: { custom: { apiKey: "k", apiBase: llm.baseURL } },
    channels: { ...opts.channels, [driver.name]: { enabled: true, allowFrom: [rig.allowedSender] } },
    ...(opts.tools ? { tools: opts.tools } : {}),
    gateway: { heartbeat: { enabled: false }, port: 0 },
  });
  const gateway = new Gateway({
    loaded: { config, workspace, path: opts.configPath },
    provider: createProvider(config),
    platforms: { [driver.name]: async () => rig.channel },
    log: captureLog().log,
  });
  await gateway.start();
  return gateway;
}
