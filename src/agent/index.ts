/** Assembles an agent (provider, tools, sessions, context, loop) from a loaded config. */
import { join } from "node:path";
import type { MessageBus } from "../bus/bus.js";
import type { Config } from "../config/schema.js";
import { builtinSkillsDir } from "../config/paths.js";
import { createProvider } from "../llm/openai-provider.js";
import type { Provider } from "../llm/types.js";
import { SessionStore } from "../sessions/store.js";
import { ContextBuilder } from "./context.js";
import { AgentLoop } from "./loop.js";
import { MemoryFiles } from "./memory.js";
import { createDefaultTools } from "./tools/index.js";

export interface Agent {
  loop: AgentLoop;
  provider: Provider;
  sessions: SessionStore;
}

export interface CreateAgentOptions {
  config: Config;
  /** Absolute workspace path (already resolved by the config loader). */
  workspace: string;
  bus: MessageBus;
  /** Replaces the configured provider (tests, benchmarks). */
  provider?: Provider;
}

export function createAgent({ config, workspace, bus, provider }: CreateAgentOptions): Agent {
  const defaults = config.agents.defaults;
  const llm = provider ?? createProvider(config);
  const sessions = new SessionStore(join(workspace, "sessions"));
  const loop = new AgentLoop({
    bus,
    provider: llm,
    tools: createDefaultTools(config, workspace),
    sessions,
    context: new ContextBuilder({ workspace, builtinSkillsDir: builtinSkillsDir() }),
    memory: new MemoryFiles(workspace),
    settings: {
      workspace,
      model: llm.model,
      memoryWindow: defaults.memoryWindow,
      maxToolIterations: defaults.maxToolIterations,
      maxConcurrentTurns: defaults.maxConcurrentTurns,
      toolResultMaxChars: config.tools.toolResultMaxChars,
    },
  });
  return { loop, provider: llm, sessions };
}
