/**
 * An agent wired to a bus over a temp workspace, driven through the real
 * openai SDK against the loopback FakeOpenAI (or a given Provider).
 * Used by tests and by bench/.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createAgent, type Agent, type CreateAgentOptions } from "../../src/create-agent.js";
import { MessageBus } from "../../src/bus/bus.js";
import type { InboundMessage, OutboundMessage } from "../../src/bus/types.js";
import { ConfigSchema, type Config } from "../../src/config/schema.js";
import { createLlm } from "../../src/llm/resilient.js";
import type { Provider } from "../../src/llm/types.js";
import { SessionStore } from "../../src/sessions/store.js";
import { FakeOpenAI } from "../fakes/openai-server.js";

export interface Harness extends Agent {
  /** The agent's sessions: files, as the harness runs without a cluster database. */
  sessions: SessionStore;
  bus: MessageBus;
  workspace: string;
  config: Config;
  /** Present unless a provider was given. */
  fake: FakeOpenAI | undefined;
  /** Every outbound message so far. */
  outbound: OutboundMessage[];
  /** Publishes a message and resolves with the next final reply to that chat (10 s bound). */
  ask(chatId: string, content: string, extra?: Partial<InboundMessage>): Promise<OutboundMessage>;
  send(chatId: string, content: string, extra?: Partial<InboundMessage>): void;
  cleanup(): Promise<void>;
}

export interface HarnessOptions {
  provider?: Provider;
  /** Deep-merged into the config (agents.defaults gets the temp workspace). */
  config?: {
    agents?: { defaults?: Record<string, unknown>; bindings?: unknown[]; allowSwitch?: boolean };
    tools?: Record<string, unknown>;
    channels?: Record<string, unknown>;
    memory?: Record<string, unknown>;
  };
  /** Passed on to createAgent (an approval policy, admins ...). */
  agent?: Partial<
    Pick<CreateAgentOptions, "approvalPolicy" | "adminsOf" | "unattended" | "allowFromOf" | "toolJournal">
  >;
  /** Called with the temp workspace before the agent starts (files it should find at start). */
  prepare?: (workspace: string) => Promise<void>;
}

export async function startHarness(opts: HarnessOptions = {}): Promise<Harness> {
  const workspace = await mkdtemp(join(tmpdir(), "palaver-test-"));
  await opts.prepare?.(workspace);
  const fake = opts.provider ? undefined : await FakeOpenAI.start();
  const config = ConfigSchema.parse({
    agents: {
      ...opts.config?.agents,
      defaults: {
        workspace,
        provider: "custom",
        model: "fake-model",
        llm: { maxRetries: 2, retryBaseDelay: 0.01, retryMaxDelay: 0.05, timeout: 5 },
        ...opts.config?.agents?.defaults,
      },
    },
    providers: fake ? { custom: { apiKey: "test-key", apiBase: fake.baseURL } } : {},
    // Approvals off unless a test turns them on: a question would wait for a person who is not there.
    tools: { approval: { mode: "off" }, ...opts.config?.tools },
    // No deltas unless a test streams: the outbound list then holds only what a chat keeps.
    channels: { streaming: false, ...opts.config?.channels },
    ...(opts.config?.memory ? { memory: opts.config.memory } : {}),
  });
  const bus = new MessageBus();
  const agent = createAgent({
    config,
    workspace,
    bus,
    cronStorePath: join(workspace, "state", "cron", "jobs.json"),
    provider: opts.provider ?? createLlm(config),
    ...opts.agent,
  });
  const outbound: OutboundMessage[] = [];
  const waiters = new Map<string, ((msg: OutboundMessage) => void)[]>();
  bus.onOutbound((msg) => {
    outbound.push(msg);
    if ((msg.kind ?? "final") !== "final") return;
    waiters.get(msg.chatId)?.shift()?.(msg);
  });
  agent.loop.start();

  const send = (chatId: string, content: string, extra: Partial<InboundMessage> = {}) =>
    bus.publishInbound({ channel: "test", senderId: "user-1", chatId, content, ...extra });

  if (!(agent.sessions instanceof SessionStore)) throw new Error("the harness expects file sessions");
  return {
    ...agent,
    sessions: agent.sessions,
    bus,
    workspace,
    config,
    fake,
    outbound,
    send,
    ask(chatId, content, extra) {
      const reply = new Promise<OutboundMessage>((resolve, reject) => {
        // Only ends a hung test: replies come in milliseconds, but a loaded machine can stall for seconds.
        const timer = setTimeout(() => reject(new Error(`no reply to "${content}" within 30 s`)), 30_000);
        const list = waiters.get(chatId) ?? [];
        list.push((msg) => {
          clearTimeout(timer);
          resolve(msg);
        });
        waiters.set(chatId, list);
      });
      send(chatId, content, extra);
      return reply;
    },
    async cleanup() {
      await agent.shutdown(1000);
      await fake?.close();
      await rm(workspace, { recursive: true, force: true });
    },
  };
}
