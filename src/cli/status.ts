/** `palaver status [--json]`: what palaver would run with, without starting anything. */
import { existsSync, readdirSync } from "node:fs";
import { join } from "node:path";
import type { Command } from "commander";
import { describeSandbox, ExecSandbox, type SandboxState } from "../agent/tools/exec/sandbox.js";
import { PLATFORM_NAMES, platformProblems } from "../channels/registry.js";
import type { LoadedConfig } from "../config/load.js";
import { memoryIndexPath, stateDir } from "../config/paths.js";
import { PAIRING_DOCUMENT, pairingPath, PairingStore } from "../pairing/store.js";
import { DOCUMENT_NAMES } from "../db/names.js";
import { errorMessage } from "../util/errors.js";
import { describeProviderChoice, formatProviderChoice, type ProviderChoice } from "../llm/provider-report.js";
import { countByChannel, formatHeldCounts, messageJournalPath, readOutbox } from "../daemon/outbox-file.js";
import { embedderModel } from "../llm/embeddings.js";
import { readIndexSummary, summaryLine, type IndexSummary } from "../recall/summary.js";
import { agentStatus } from "./agents.js";
import { addCommonOptions, loadForCli } from "./common.js";
import { readGatewayStatus, webChatLink } from "./gateway-status.js";
import type { ClusterReport } from "../cluster/status.js";
import { clusterStatusLines } from "../cluster/status-lines.js";
import { logger } from "../log.js";

export interface StatusReport {
  config: { path: string; exists: boolean };
  workspace: { path: string; exists: boolean };
  model: string;
  /** The configured provider name, or "auto". */
  provider: string;
  /** Where replies come from: the provider the routing chose, its base URL, the model sent and the rule; or the error. */
  llm: ProviderChoice;
  /** Whether each configured provider has an API key (never the key itself). */
  providers: Record<string, { apiKeySet: boolean }>;
  /** Names of the enabled channels. */
  channels: string[];
  /** What stops an enabled channel from starting, in plain words with the config path (the gateway skips it). */
  problems: string[];
  /** Number of sessions/*.jsonl files in the workspace (cluster mode: sessions in the cluster's database). */
  sessions: number | { unavailable: string };
  /** People let in by pairing (all platforms), and codes waiting for the owner. */
  pairing: { approved: number; pending: number } | { unavailable: string };
  /** Whether a gateway runs on this state folder: its pid, since when, its address and the web chat link. */
  gateway: GatewayReport;
  /** Replies not yet delivered, per channel (the journal's outbox: held for a channel that is not running, or being retried). */
  held: Record<string, number>;
  /** Whether shell commands run in the bubblewrap sandbox, and if not, why (probed by the status command). */
  exec?: { sandboxed: boolean; detail: string };
  /** Memory search: what its index holds and the embeddings' state, or why there is no index. */
  memory: IndexSummary | { unavailable: string };
  /** The named agents (<workspace>/agents/*.md) and their problems (palaver agents check). */
  agents?: { names: string[]; problems: string[] };
  /** Cluster mode (cluster.database set): instances alive, lease holders, turns; or why it could not be read. */
  cluster?: ClusterReport;
}

export interface GatewayReport {
  running: boolean;
  pid?: number;
  since?: string;
  address?: string;
  /** The link that opens the web chat signed in (it holds the token, as the file it comes from). */
  webChat?: string;
}

function gatewayReport(state: string): GatewayReport {
  const status = readGatewayStatus(state);
  if (!status) return { running: false };
  const link = webChatLink(state, status);
  return {
    running: true,
    pid: status.pid,
    ...(status.since ? { since: status.since } : {}),
    ...(status.address ? { address: status.address } : {}),
    ...(link ? { webChat: link } : {}),
  };
}

function formatGateway(g: GatewayReport): [string, string][] {
  if (!g.running) return [["gateway", "not running (start it with `npm start` or `palaver gateway`)"]];
  const since = g.since ? `, since ${g.since}` : "";
  const rows: [string, string][] = [
    ["gateway", `running (pid ${g.pid}${since}) at ${g.address ?? "no address"}`],
  ];
  if (g.webChat) rows.push(["web chat", g.webChat]);
  return rows;
}

export function countSessions(workspace: string): number {
  try {
    return readdirSync(join(workspace, "sessions"), { withFileTypes: true }).filter(
      (e) => e.isFile() && e.name.endsWith(".jsonl"),
    ).length;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return 0;
    throw err;
  }
}

export function buildStatus(loaded: LoadedConfig, sandbox?: SandboxState): StatusReport {
  const { config } = loaded;
  const providers: StatusReport["providers"] = {};
  for (const [name, p] of Object.entries(config.providers)) providers[name] = { apiKeySet: p.apiKey !== "" };
  return {
    config: { path: loaded.path, exists: loaded.exists },
    workspace: { path: loaded.workspace, exists: existsSync(loaded.workspace) },
    model: config.agents.defaults.model,
    provider: config.agents.defaults.provider,
    llm: describeProviderChoice(config),
    providers,
    channels: PLATFORM_NAMES.filter((name) => config.channels[name].enabled),
    problems: platformProblems(config),
    sessions: countSessions(loaded.workspace),
    pairing: pairingCountsOf(new PairingStore(pairingPath(stateDir(loaded.path)))),
    gateway: gatewayReport(stateDir(loaded.path)),
    held: countByChannel(readOutbox(messageJournalPath(stateDir(loaded.path)))),
    memory: memorySummary(loaded),
    ...(sandbox ? { exec: { sandboxed: sandbox.sandboxed, detail: describeSandbox(sandbox) } } : {}),
  };
}

function memorySummary(loaded: LoadedConfig): StatusReport["memory"] {
  const summary = readIndexSummary(memoryIndexPath(stateDir(loaded.path)), embedderModel(loaded.config));
  return typeof summary === "string" ? { unavailable: summary } : summary;
}

function pairingLine(pairing: StatusReport["pairing"]): string {
  if ("unavailable" in pairing) return pairing.unavailable;
  const { approved, pending } = pairing;
  const waiting = `${pending} ${pending === 1 ? "code" : "codes"} waiting`;
  return `${approved} approved, ${waiting}${pending ? " (palaver pairing list)" : ""}`;
}

function pairingCountsOf(store: PairingStore): { approved: number; pending: number } {
  return { approved: store.approved().length, pending: store.pending().length };
}

/** Probes the exec sandbox the way the gateway would (same config), for the report. */
async function sandboxState(loaded: LoadedConfig): Promise<SandboxState | undefined> {
  const { sandbox: mode, network } = loaded.config.tools.exec;
  const sandbox = new ExecSandbox({ mode, network });
  // A failed "require" is reported, not thrown: status should describe a broken setup, not refuse to.
  await sandbox.state().catch(() => undefined);
  return sandbox.current;
}

export function formatStatus(s: StatusReport): string {
  const providers = Object.entries(s.providers);
  const rows: [string, string][] = [
    ...formatGateway(s.gateway),
    ["config", `${s.config.path} ${s.config.exists ? "(exists)" : "(missing: run `palaver onboard`)"}`],
    [
      "workspace",
      `${s.workspace.path} ${s.workspace.exists ? "(exists)" : "(missing: run `palaver onboard`)"}`,
    ],
    ["model", s.model],
    ["provider", `${s.provider} → ${formatProviderChoice(s.llm)}`],
    ...s.llm.warnings.map((w): [string, string] => ["warning", w]),
    [
      "providers",
      providers.length === 0
        ? "none configured (set providers.NAME.apiKey)"
        : providers.map(([name, p]) => `${name} (${p.apiKeySet ? "key set" : "no key"})`).join(", "),
    ],
    ["channels", s.channels.length === 0 ? "none enabled" : s.channels.join(", ")],
    ...s.problems.map((problem): [string, string] => ["problem", problem]),
    ["sessions", typeof s.sessions === "number" ? String(s.sessions) : s.sessions.unavailable],
    ["pairing", pairingLine(s.pairing)],
    [
      "held",
      formatHeldCounts(s.held) === "none"
        ? "no undelivered replies"
        : `${formatHeldCounts(s.held)} undelivered (palaver outbox list)`,
    ],
    ["memory", "unavailable" in s.memory ? s.memory.unavailable : summaryLine(s.memory)],
    ...(s.exec ? ([["exec", s.exec.detail]] as [string, string][]) : []),
    ...clusterRows(s.cluster),
    ...(s.agents
      ? ([
          ["agents", s.agents.names.length ? s.agents.names.join(", ") : "none"],
          ...s.agents.problems.map((p) => ["problem", p]),
        ] as [string, string][])
      : []),
  ];
  return ["palaver status", ...rows.map(([k, v]) => `  ${k.padEnd(10)} ${v}`)].join("\n");
}

function clusterRows(report: ClusterReport | undefined): [string, string][] {
  if (!report) return [];
  if ("unavailable" in report) return [["cluster", report.unavailable]];
  return clusterStatusLines(report).map((line) => ["cluster", line]);
}

/**
 * Cluster mode: the cluster's rows, and the sessions and pairing counts from its database (this
 * host's files are not used). Loaded only then: one process's status does not load the PostgreSQL
 * client.
 */
async function clusterStatus(url: string): Promise<Pick<StatusReport, "cluster" | "sessions" | "pairing">> {
  const { readClusterReport } = await import("../cluster/status.js");
  const cluster = await readClusterReport(url, logger("status"));
  if ("unavailable" in cluster) {
    const unavailable = { unavailable: "in the cluster's database (see cluster)" };
    return { cluster, sessions: unavailable, pairing: unavailable };
  }
  const { withClusterDocument } = await import("./cluster-documents.js");
  const pairing = await withClusterDocument(url, DOCUMENT_NAMES.pairing, PAIRING_DOCUMENT, (doc) =>
    pairingCountsOf(new PairingStore(doc)),
  ).catch((err: unknown) => ({ unavailable: `not read from the cluster: ${errorMessage(err)}` }));
  return { cluster, sessions: cluster.sessions, pairing };
}

export function registerStatusCommand(program: Command): Command {
  const cmd = program
    .command("status")
    .description("show the config, workspace, model, providers, channels and sessions")
    .option("--json", "print as JSON (for scripts)")
    .action(async (opts: { json?: boolean }, command: Command) => {
      const loaded = loadForCli(command);
      const report = {
        ...buildStatus(loaded, await sandboxState(loaded)),
        agents: await agentStatus(loaded),
        ...(loaded.config.cluster.database ? await clusterStatus(loaded.config.cluster.database) : {}),
      };
      process.stdout.write(opts.json ? `${JSON.stringify(report, null, 2)}\n` : `${formatStatus(report)}\n`);
    });
  addCommonOptions(cmd);
  return cmd;
}
