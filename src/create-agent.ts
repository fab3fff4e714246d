/**
 * Assembles an agent from a loaded config: provider, tools, sessions,
 * context, memory consolidation, subagents, the cron service and the loop.
 * The gateway, `palaver chat` and `palaver cron run` all build it this way.
 */
import { dirname, join } from "node:path";
import { FileChatRules } from "./approvals/chat-rules.js";
import type { QuestionBoard } from "./approvals/question-board.js";
import { createApprovalGate, type ApprovalMeter } from "./approvals/gate.js";
import { createApprovalPolicy } from "./approvals/policy.js";
import type { ApprovalPolicy } from "./approvals/types.js";
import { formatWait, Questions } from "./approvals/questions.js";
import type { MessageBus } from "./bus/bus.js";
import {
  adminsOf as configAdmins,
  allowFromOf as configAllowFrom,
  isOwner,
  isSenderAllowed,
} from "./config/allow-from.js";
import { approvalRulesPath, builtinSkillsDir, openQuestionsPath } from "./config/paths.js";
import type { Config } from "./config/schema.js";
import { CronService } from "./cron/service.js";
import type { CronJobStore } from "./cron/store-types.js";
import { checkTarget, gatewayJobs, terminalJobs } from "./cron/targets.js";
import { isNothingToDo } from "./heartbeat/heartbeat.js";
import { describeProviderChoice, formatProviderChoice } from "./llm/provider-report.js";
import { createLlm } from "./llm/resilient.js";
import { loadMcp, type McpTools } from "./mcp/lazy.js";
import { mcpStatusLines } from "./mcp/status.js";
import type { Provider } from "./llm/types.js";
import type { SessionStorage } from "./sessions/storage.js";
import { SessionStore, sessionsDirOf } from "./sessions/store.js";
import { MemoryConsolidator, type MemoryConsolidatorOptions } from "./agent/consolidation.js";
import { ContextBuilder } from "./agent/context.js";
import { AgentLoop, type AgentLoopDeps } from "./agent/loop.js";
import { SubagentManager } from "./agent/subagents.js";
import { ConversationAgents } from "./agent/agents/conversation.js";
import { AgentDirectory } from "./agent/agents/directory.js";
import { NamedAgents } from "./agent/agents/named-agents.js";
import { createDelegateTool } from "./agent/tools/delegate.js";
import { normalizeModel, resolveProvider } from "./llm/providers.js";
import { withModel } from "./llm/with-model.js";
import { createTodoTools } from "./agent/tools/todo.js";
import { createLoadToolsTool } from "./agent/tools/load-tools.js";
import { ToolTiers } from "./agent/tool-tiers.js";
import { ContextBudget } from "./agent/budget/budget.js";
import { budgetSettings } from "./agent/budget/windows.js";
import { logger } from "./log.js";
import { createAskHumanTool } from "./agent/tools/ask-human.js";
import { createCronTool } from "./agent/tools/cron.js";
import { describeSandbox, ExecSandbox } from "./agent/tools/exec/sandbox.js";
import { createDefaultTools, createWorkerTools } from "./agent/tools/index.js";
import type { ToolRegistry } from "./agent/tools/registry.js";
import { createSpawnTool } from "./agent/tools/spawn.js";
import { secondsToTimerMs } from "./util/timers.js";
import { createRecall } from "./create-recall.js";
import { loadSqlite } from "./recall/sqlite.js";
import type { MemoryRecall } from "./recall/service.js";
import { SYSTEM_CHANNEL } from "./bus/types.js";
import { BudgetWatch } from "./usage/budget.js";
import { UsageLedger, usageLedgerPath } from "./usage/ledger.js";
import {
  usageReportFor,
  type UsageAsker,
  type UsageCommandOptions,
  type UsageReport,
} from "./usage/command.js";
import { meterUsage } from "./usage/metered.js";
import { OwnerNotices, type OwnerRef } from "./usage/owner-notices.js";
import type { UsageEntry, UsageKind } from "./usage/record.js";

export interface Agent {
  loop: AgentLoop;
  provider: Provider;
  sessions: SessionStorage;
  tools: ToolRegistry;
  subagents: SubagentManager;
  consolidator: MemoryConsolidator;
  /** The job store and scheduler; the gateway starts it, elsewhere only the cron tool uses it. */
  cron: CronService;
  /**
   * MCP servers; they connect in the background as soon as the agent is created. Without servers
   * configured the MCP SDK is never loaded.
   */
  mcp: McpTools;
  /** Whether exec runs in bubblewrap; the gateway awaits it at start (mode "require" fails there). */
  execSandbox: ExecSandbox;
  /** Memory search (memory_search, memory_get); absent on a Node without node:sqlite. */
  recall: MemoryRecall | undefined;
  /** The question desk (approvals, ask_human): give it to the ChannelManager (option `questions`). */
  questions: Questions;
  /** Spending limits (usage/budget.ts): the heartbeat asks it whether to pause. */
  budget: BudgetWatch;
  /** What /usage reports, as numbers, for `session` as `asker` may see it (the web chat's panel). */
  usageReport(asker: UsageAsker, session: string): UsageReport;
  /**
   * Stops taking messages, lets running turns finish for up to `graceMs`,
   * then cancels subagents, waits for memory consolidation and stops the scheduler.
   */
  shutdown(graceMs: number): Promise<void>;
}

/** What the instances of a cluster share instead of files of their own (gateway.ts builds it). */
export interface SharedStores {
  sessions: SessionStorage;
  cronStore: CronJobStore;
  chatRules: FileChatRules;
  questionBoard: QuestionBoard;
  /** Memory consolidations one at a time in the cluster (MEMORY.md is shared). */
  memoryExclusive: NonNullable<MemoryConsolidatorOptions["exclusive"]>;
}

export interface CreateAgentOptions {
  config: Config;
  /** Absolute workspace path (already resolved by the config loader). */
  workspace: string;
  bus: MessageBus;
  /** The cron job file (cronStorePath(configPath)). */
  cronStorePath: string;
  /** Cluster mode: the stores every instance shares (the database), in place of this process's files. */
  shared?: SharedStores;
  /**
   * The config file: exec hides it, its folder (the state folder) and .env files from commands,
   * and the message tool never attaches them.
   */
  configPath?: string;
  /** Replaces the configured provider (tests, benchmarks). */
  provider?: Provider;
  /** Called when a message's turn has ended (the gateway's journal marks it done). */
  onHandled?: AgentLoopDeps["onHandled"];
  /** Records tool calls so a replayed turn does not repeat them (the gateway's tool journal). */
  toolJournal?: AgentLoopDeps["toolJournal"];
  /** Called when a message's turn begins (the gateway's journal counts starts). */
  onTurnStart?: AgentLoopDeps["onTurnStart"];
  /**
   * A channel's allowFrom as it is now: the gateway's follows SIGHUP reloads.
   * Default: the config given. Used by the message tool (who may be written to)
   * and the scheduler (whose jobs may still run).
   */
  allowFromOf?: (channel: string) => readonly string[] | undefined;
  /**
   * `palaver chat`'s terminal chat id: its scheduler runs only that chat's jobs and does not announce
   * itself as the gateway. Default: the gateway's scheduler, which runs every job but the terminal's.
   */
  terminalChat?: string;
  /** A channel's admins as they are now (who may answer any approval there). Default: the config given. */
  adminsOf?: (channel: string) => readonly string[];
  /**
   * Nobody is there to answer questions (`palaver chat -m`, piped input): calls that need an approval
   * are denied at once and ask_human says no one can answer, instead of waiting for the timeout.
   */
  unattended?: boolean;
  /** Counts approval decisions (/metrics). */
  approvalMeter?: ApprovalMeter;
  /** The owner's /pairing command and its /status line (the gateway's pairing gate). */
  pairing?: AgentLoopDeps["pairing"];
  /** Replaces the policy built from tools.approval (tests); mode "off" still means no gate. */
  approvalPolicy?: ApprovalPolicy;
  /** Each LLM call's usage, after the ledger has it (the gateway's metrics). */
  onUsage?: (entry: UsageEntry) => void;
  /** The config as it is now, for prices (the gateway's follows SIGHUP). Default: the config given. */
  currentConfig?: () => Pick<Config, "pricing" | "channels" | "budget">;
  /** More /status lines from the host (the gateway's replies held for channels that are not running). */
  statusLines?: () => string[];
}

export function createAgent({
  config,
  workspace,
  bus,
  cronStorePath,
  shared,
  configPath,
  provider,
  onHandled,
  toolJournal,
  onTurnStart,
  allowFromOf = (channel) => configAllowFrom(config, channel),
  terminalChat,
  adminsOf = (channel) => configAdmins(config, channel),
  unattended = false,
  approvalMeter,
  approvalPolicy,
  pairing,
  onUsage,
  currentConfig = () => config,
  statusLines,
}: CreateAgentOptions): Agent {
  const defaults = config.agents.defaults;
  const unmetered = provider ?? createLlm(config);
  const sessionsDir = sessionsDirOf(workspace);
  // Sessions ended by /new are moved to sessions/archive/ (memory search keeps finding them).
  const sessions =
    shared?.sessions ??
    new SessionStore(sessionsDir, undefined, { archiveDir: join(sessionsDir, "archive") });
  const context = new ContextBuilder({
    workspace,
    builtinSkillsDir: builtinSkillsDir(),
    promptFileMaxChars: defaults.promptFileMaxChars,
    memorySearch: !("missing" in loadSqlite()),
  });
  // One MemoryFiles for the prompt and for consolidation, so a memory update reaches the next turn at once.
  const memory = context.memory;
  // One sandbox decision (one bwrap probe) for the agent's and the subagents' exec.
  const execSandbox = new ExecSandbox({
    mode: config.tools.exec.sandbox,
    network: config.tools.exec.network,
  });
  const exec = { sandbox: execSandbox, ...(configPath ? { configPath } : {}) };
  // Decided in the background now (one cached probe), so the first command and /status need not wait;
  // a "require" failure is reported by the gateway's start and by exec itself.
  execSandbox.state().catch(() => undefined);
  // The cron store lives at <state folder>/cron/jobs.json (config/paths.ts).
  const stateDir = configPath ? dirname(configPath) : dirname(dirname(cronStorePath));
  const approval = config.tools.approval;
  // Every LLM call counted, priced and written to <state>/usage/usage.jsonl (src/usage/).
  const usageLedger = new UsageLedger(usageLedgerPath(stateDir));
  // One owner check for /agent, /usage, /memory undo and the budget's warnings (README, "Who may talk to it").
  const isOwnerNow = (msg: UsageAsker) => isOwner(currentConfig(), msg);
  const budgetWatch = createBudgetWatch(bus, usageLedger, stateDir, currentConfig, isOwnerNow);
  const recordUsage = (entry: UsageEntry) => {
    budgetWatch.record(entry);
    onUsage?.(entry);
  };
  const metered = (kind?: UsageKind): Provider =>
    meterUsage(unmetered, usageMeterOptions(config, usageLedger, currentConfig, recordUsage, kind));
  const llm = metered();
  // Without a config file (tests, benchmarks) the same files under the folder that holds the cron store.
  const approvalFiles = configPath
    ? { rules: approvalRulesPath(configPath), open: openQuestionsPath(configPath) }
    : { rules: join(stateDir, "approvals", "rules.json"), open: join(stateDir, "approvals", "open.json") };
  const questionTimeoutMs = secondsToTimerMs(approval.timeoutSeconds);
  const questions = new Questions({
    publish: (msg) => bus.publishOutbound(msg),
    timeoutMs: questionTimeoutMs,
    admins: adminsOf,
    allowFrom: allowFromOf,
    // Only the gateway's prompts outlive it (palaver chat shares the state folder and prints lines).
    ...(shared
      ? { board: shared.questionBoard }
      : terminalChat === undefined
        ? { statePath: approvalFiles.open }
        : {}),
    unattended,
  });
  const chatRules = shared?.chatRules ?? new FileChatRules(approvalFiles.rules);
  // Mode "off" without rules: no gate at all, so a tool call costs what it did before approvals
  // existed. The config's rules apply in every mode (README, "Approvals").
  const approve =
    approval.mode === "off" && approval.rules.length === 0
      ? undefined
      : createApprovalGate({
          policy:
            approvalPolicy ??
            createApprovalPolicy(approval, {
              chatRules,
              restrictToWorkspace: config.tools.restrictToWorkspace,
              denyPatterns: config.tools.exec.denyPatterns,
              stateDir,
            }),
          desk: questions,
          chatRules,
          timeoutMs: questionTimeoutMs,
          ...(approvalMeter ? { meter: approvalMeter } : {}),
          // Until the sandbox is decided, and without it, commands can reach the network.
          execNetwork: () => {
            const state = execSandbox.current;
            return !state?.sandboxed || state.network;
          },
        });
  // One budget per agent: the subagents count and fit their own prompts.
  const budget = budgetSettings(defaults, [llm.model, ...defaults.fallbackModels]);
  // A model written as in agents.defaults.model ("deepseek/deepseek-chat") reaches the endpoint the same way.
  const modelName = (model: string) => {
    try {
      return normalizeModel(model, resolveProvider(config).name);
    } catch {
      return model;
    }
  };
  const utilityModel = defaults.models.utility ? modelName(defaults.models.utility) : undefined;
  // Subagents and consolidation on the utility model, their calls counted under their own kind.
  const utilityFor = (kind: UsageKind) => withModel(metered(kind), utilityModel);
  const workerTools = createWorkerTools(config, workspace, exec);
  const subagents = new SubagentManager({
    provider: utilityFor("subagent"),
    tools: workerTools,
    bus,
    workspace,
    maxConcurrent: defaults.maxSubagents,
    paused: () => budgetWatch.pausedReason("background tasks"),
    maxIterations: defaults.subagentMaxIterations,
    maxContinuations: defaults.maxContinuations,
    toolResultMaxChars: config.tools.toolResultMaxChars,
    ...(approve ? { approve } : {}),
    budget: new ContextBudget(budget, logger("subagents")),
  });
  const agentBudget = new ContextBudget(budget, logger("agent"));
  const consolidator = new MemoryConsolidator({
    provider: utilityFor("consolidation"),
    memory,
    sessions,
    memoryWindow: defaults.memoryWindow,
    tokens: { count: (m) => agentBudget.counter.message(m), threshold: budget.consolidationTokens },
    budget: agentBudget,
    memoryMaxChars: defaults.promptFileMaxChars,
    ...(shared ? { exclusive: shared.memoryExclusive } : {}),
  });
  const cron = new CronService({
    ...(shared ? { store: shared.cronStore } : { storePath: cronStorePath }),
    bus,
    maxCatchUp: config.cron.maxCatchUp,
    allowFromOf,
    runs: terminalChat === undefined ? gatewayJobs : terminalJobs(terminalChat),
    announce: terminalChat === undefined,
    sessions,
    paused: () => budgetWatch.pausedReason("cron jobs"),
  });

  const tools = createDefaultTools(config, workspace, exec, {
    secrets: { stateDir, configPath },
    targets: {
      hasSession: (channel, chatId) => sessions.hasChat(channel, chatId),
      allowFrom: allowFromOf,
    },
  });
  const namedAgents = new NamedAgents({
    directory: new AgentDirectory(workspace),
    provider: llm,
    ...(defaults.models.utility ? { utilityModel: defaults.models.utility } : {}),
    modelName,
    pool: tools,
    workerToolNames: () => workerTools.names,
    skills: context.skills,
    ...(approve ? { approve } : {}),
    budget: new ContextBudget(budget, logger("agents")),
    maxIterations: defaults.subagentMaxIterations,
    toolResultMaxChars: config.tools.toolResultMaxChars,
    workspace,
  });
  tools.register(createSpawnTool(subagents, namedAgents));
  tools.register(createDelegateTool({ agents: namedAgents, stack: [], mayCall: () => true }));
  const conversationAgents = new ConversationAgents({
    agents: namedAgents,
    provider: llm,
    tools,
    bindings: () => config.agents.bindings,
    allowSwitch: () => config.agents.allowSwitch,
    isOwner: isOwnerNow,
    ...(!defaults.supportsVision && defaults.models.vision
      ? { visionModel: modelName(defaults.models.vision) }
      : {}),
  });
  for (const tool of createTodoTools(sessions)) tools.register(tool);
  const tiers = new ToolTiers(tools, config.tools.tiers, (definitions) =>
    agentBudget.counter.tools(definitions),
  );
  tools.register(createLoadToolsTool(tiers, sessions));
  tools.unknownToolHelp = () => tiers.directory();
  // In every mode: asking the user a question needs no approval.
  tools.register(createAskHumanTool(questions, formatWait(questionTimeoutMs)));
  tools.register(createCronTool(cron, (channel, chatId) => checkTarget(config, channel, chatId)));
  const recall = createRecall({ config, stateDir, sessions, memory, tools, isOwner: isOwnerNow });
  const mcp = loadMcp({
    servers: config.tools.mcpServers,
    registry: tools,
    workspace,
    maxResultChars: config.tools.toolResultMaxChars,
  });
  // Never awaited: a slow or broken MCP server must not delay startup or the first reply.
  mcp.startInBackground();

  // Which endpoint the config routes to and why (said once; an injected test provider has no route to show).
  const choice = describeProviderChoice(config);
  const llmStatus = "error" in choice ? [] : [`LLM: ${formatProviderChoice(choice)}`];
  const usageOptions: UsageCommandOptions = { ledger: usageLedger, isOwner: isOwnerNow };
  const loop = new AgentLoop({
    bus,
    provider: llm,
    tools,
    sessions,
    context,
    memory,
    archiver: consolidator,
    subagents,
    schedule: cron,
    isNothingToDo,
    onHandled: (msg, report) => {
      onHandled?.(msg, report);
      cron.turnEnded(msg);
    },
    toolJournal,
    onTurnStart,
    questions,
    ...(approve ? { approve } : {}),
    budget: agentBudget,
    agents: conversationAgents,
    tiers,
    ...(pairing ? { pairing } : {}),
    memoryCommand: recall.command,
    usage: usageOptions,
    budgetStop: () => budgetWatch.hardStopReply(),
    statusLines: () => [
      ...llmStatus,
      execStatusLine(execSandbox),
      ...mcpStatusLines(mcp.status()),
      ...(statusLines?.() ?? []),
      recall.statusLine(),
      ...budgetWatch.statusLines(),
    ],
    settings: {
      workspace,
      model: llm.model,
      memoryWindow: defaults.memoryWindow,
      maxToolIterations: defaults.maxToolIterations,
      maxContinuations: defaults.maxContinuations,
      maxConcurrentTurns: defaults.maxConcurrentTurns,
      toolResultMaxChars: config.tools.toolResultMaxChars,
      streaming: config.channels.streaming,
    },
  });

  return {
    loop,
    provider: llm,
    sessions,
    tools,
    subagents,
    consolidator,
    cron,
    mcp,
    execSandbox,
    questions,
    recall: recall.recall,
    budget: budgetWatch,
    usageReport: (asker, session) => usageReportFor(asker, session, usageOptions),
    async shutdown(graceMs) {
      await loop.shutdown(graceMs);
      await subagents.shutdown(Math.min(graceMs, 5000));
      await consolidator.drain(Math.min(graceMs, 10_000));
      await cron.stop();
      await mcp.shutdown();
      // Last: the turns, consolidation and cron above may still have appended.
      await sessions.close();
      await recall.recall?.close();
    },
  };
}

/** The /status line about the exec sandbox. */
function execStatusLine(sandbox: ExecSandbox): string {
  const state = sandbox.current;
  return `Shell commands (exec): ${state ? describeSandbox(state) : "sandbox check still running"}`;
}

/** The usage decorator's settings: the route's provider name, live prices, the ledger then `onUsage`. */
function usageMeterOptions(
  config: Config,
  ledger: UsageLedger,
  currentConfig: () => Pick<Config, "pricing" | "channels" | "budget">,
  onUsage: ((entry: UsageEntry) => void) | undefined,
  kind: UsageKind | undefined,
): Parameters<typeof meterUsage>[1] {
  const choice = describeProviderChoice(config);
  return {
    providerName: "error" in choice ? "unknown" : choice.provider,
    pricing: () => currentConfig().pricing,
    record: (entry) => {
      ledger.append(entry);
      onUsage?.(entry);
    },
    ...(kind ? { kind } : {}),
  };
}

/**
 * The budget's watch (usage/budget.ts), its limits read live. The warning goes to every owner
 * (usage/owner-notices.ts): the chats they wrote from since the start, a Telegram owner's private
 * chat, and otherwise the owner's chat the first time they write.
 */
function createBudgetWatch(
  bus: MessageBus,
  ledger: UsageLedger,
  stateDir: string,
  currentConfig: () => Pick<Config, "channels" | "budget">,
  isOwnerNow: (msg: UsageAsker) => boolean,
): BudgetWatch {
  const notices = new OwnerNotices({
    owners: () => configuredOwners(currentConfig()),
    isOwner: (msg) => msg.channel !== SYSTEM_CHANNEL && isOwnerNow(msg),
    matches: (senderId, aliases, ownerId) => isSenderAllowed(senderId, aliases, [ownerId]),
    publish: (msg) => bus.publishOutbound(msg),
    pendingPath: join(stateDir, "usage", "owner-notices.json"),
    log: logger("budget"),
  });
  bus.onInbound((msg) => notices.seen(msg));
  return new BudgetWatch({
    budget: () => currentConfig().budget,
    entries: ledger.read(),
    markerPath: join(stateDir, "usage", "budget-warned.json"),
    notifyOwners: (content) => notices.notify(content),
    log: logger("budget"),
  });
}

/** The owners of the enabled platforms: their allowFrom and admins (the wildcard names nobody). */
function configuredOwners(config: Pick<Config, "channels">): OwnerRef[] {
  const owners: OwnerRef[] = [];
  for (const [channel, section] of Object.entries(config.channels)) {
    if (
      section === null ||
      typeof section !== "object" ||
      !("enabled" in section) ||
      section.enabled !== true
    )
      continue;
    const ids = new Set([...(configAllowFrom(config, channel) ?? []), ...configAdmins(config, channel)]);
    for (const id of ids) if (id !== "*") owners.push({ channel, id });
  }
  return owners;
}
