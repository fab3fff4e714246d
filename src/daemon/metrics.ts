/**
 * Prometheus metrics of the daemon (prom-client). The gateway feeds them from
 * the bus (messages in), the channel manager (messages delivered or not),
 * the loop's turn reports (latency, tool calls)
 * and a provider wrapper (LLM calls, errors, tokens); gauges are read when
 * scraped.
 */
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from "prom-client";
import type { InboundMessage, OutboundMessage } from "../bus/types.js";
import type { TurnReport } from "../agent/loop.js";
import type { ChatRequest, ChatResponse, Provider } from "../llm/types.js";
import type { UsageEntry } from "../usage/record.js";
import { LlmError } from "../util/errors.js";

export interface LiveCounts {
  queueDepth(): number;
  activeTurns(): number;
  activeSubagents(): number;
  /** Cluster mode: the cluster as last read from its database (cluster/view.ts); undefined: no cluster, or not read yet. */
  cluster?(): ClusterCounts | undefined;
}

export interface ClusterCounts {
  instances: number;
  queued: number;
  running: number;
  blocked: number;
  /** Lease name → whether this instance holds it. */
  leases: Record<string, boolean>;
}

export class Metrics {
  readonly registry = new Registry();
  private readonly messagesIn: Counter<"channel">;
  private readonly messagesOut: Counter<"channel" | "kind">;
  private readonly messagesFailed: Counter<"channel" | "kind" | "reason">;
  private readonly turnSeconds: Histogram<"outcome">;
  private readonly llmCalls: Counter<"model">;
  private readonly llmErrors: Counter<"kind">;
  private readonly llmTokens: Counter<"type">;
  private readonly promptTokens: Histogram;
  private readonly toolCalls: Counter<"tool">;
  private readonly toolErrors: Counter<"tool">;
  private readonly approvals: Counter<"decision">;
  private readonly approvalWait: Histogram<"decision">;
  private readonly usageTokens: Counter<"model" | "kind" | "type">;
  private readonly usageCost: Counter<"model" | "kind">;
  /** When the LLM last answered / last failed (ms since epoch), for /readyz. */
  lastLlmSuccessAt: number | undefined;
  lastLlmFailureAt: number | undefined;

  constructor(live: LiveCounts) {
    const registers = [this.registry];
    collectDefaultMetrics({ register: this.registry, prefix: "palaver_" });
    this.messagesIn = new Counter({
      name: "palaver_messages_in_total",
      help: "Messages taken in, per channel",
      labelNames: ["channel"],
      registers,
    });
    this.messagesOut = new Counter({
      name: "palaver_messages_out_total",
      help: "Messages delivered to the platform, per channel and kind (final, progress, toolHint)",
      labelNames: ["channel", "kind"],
      registers,
    });
    this.messagesFailed = new Counter({
      name: "palaver_messages_failed_total",
      help:
        "Messages that could not be delivered, per channel, kind and reason " +
        "(permanent, gave_up after retries, failed_once for progress and hints, overflow while the channel was down)",
      labelNames: ["channel", "kind", "reason"],
      registers,
    });
    this.turnSeconds = new Histogram({
      name: "palaver_turn_duration_seconds",
      help: "Time from taking a message off the queue to the end of its turn",
      labelNames: ["outcome"],
      buckets: [0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 120, 300],
      registers,
    });
    this.llmCalls = new Counter({
      name: "palaver_llm_calls_total",
      help: "LLM calls (after retries)",
      labelNames: ["model"],
      registers,
    });
    this.llmErrors = new Counter({
      name: "palaver_llm_errors_total",
      help: "LLM calls that failed, by kind",
      labelNames: ["kind"],
      registers,
    });
    this.llmTokens = new Counter({
      name: "palaver_llm_tokens_total",
      help: "Tokens used, prompt and completion",
      labelNames: ["type"],
      registers,
    });
    this.promptTokens = new Histogram({
      name: "palaver_llm_prompt_tokens",
      help: "Prompt tokens of each LLM call as the provider counted them (how full the context window gets)",
      buckets: [1_000, 4_000, 8_000, 16_000, 32_000, 64_000, 100_000, 128_000, 200_000, 400_000, 1_000_000],
      registers,
    });
    this.toolCalls = new Counter({
      name: "palaver_tool_calls_total",
      help: "Tool calls by the agent",
      labelNames: ["tool"],
      registers,
    });
    this.toolErrors = new Counter({
      name: "palaver_tool_errors_total",
      help: "Tool calls that returned an error",
      labelNames: ["tool"],
      registers,
    });
    this.approvals = new Counter({
      name: "palaver_approvals_total",
      help:
        "Approval checks of tool calls by decision: allowed or denied by the policy, approved or rejected " +
        "by a person, timeout (no answer), stopped (/stop or shutdown while asking)",
      labelNames: ["decision"],
      registers,
    });
    this.approvalWait = new Histogram({
      name: "palaver_approval_wait_seconds",
      help: "How long a tool call waited for a person's answer, by decision",
      labelNames: ["decision"],
      buckets: [1, 5, 15, 30, 60, 120, 300, 600, 1800],
      registers,
    });
    this.usageTokens = new Counter({
      name: "palaver_usage_tokens_total",
      help: "Tokens of LLM calls by model, kind of work (chat, heartbeat, cron, subagent, consolidation, delegate) and type (prompt, completion, cached, reasoning)",
      labelNames: ["model", "kind", "type"],
      registers,
    });
    this.usageCost = new Counter({
      name: "palaver_usage_cost_usd_total",
      help: "Cost in US dollars of LLM calls by model and kind of work, from `pricing` (models without a price add nothing)",
      labelNames: ["model", "kind"],
      registers,
    });
    const gauge = (name: string, help: string, read: () => number) =>
      new Gauge({
        name,
        help,
        registers,
        collect() {
          this.set(read());
        },
      });
    gauge("palaver_queue_depth", "Messages waiting or running in the agent's lanes", () => live.queueDepth());
    gauge("palaver_active_turns", "Turns running now", () => live.activeTurns());
    gauge("palaver_active_subagents", "Background subagents running now", () => live.activeSubagents());
    if (live.cluster) this.clusterGauges(live.cluster.bind(live), registers);
    // Beside the default process metrics (fds, handles, active resources): a count that only grows is a leak.
    gauge(
      "palaver_process_listeners",
      "Event listeners on the process object (signals, exit, warnings)",
      () => process.eventNames().reduce((n, event) => n + process.listenerCount(event), 0),
    );
  }

  private clusterGauges(read: () => ClusterCounts | undefined, registers: Registry[]): void {
    const gauge = (name: string, help: string, pick: (c: ClusterCounts) => number) =>
      new Gauge({
        name,
        help,
        registers,
        collect() {
          const counts = read();
          if (counts) this.set(pick(counts));
        },
      });
    gauge(
      "palaver_cluster_instances",
      "Instances of the cluster alive (seen in the last 30 s)",
      (c) => c.instances,
    );
    gauge("palaver_cluster_turns_queued", "Turns waiting in the cluster's queue", (c) => c.queued);
    gauge("palaver_cluster_turns_running", "Turns running on any instance", (c) => c.running);
    gauge(
      "palaver_cluster_conversations_blocked",
      "Conversations whose turn failed every retry (nothing of theirs runs until unblocked)",
      (c) => c.blocked,
    );
    new Gauge({
      name: "palaver_cluster_lease_held",
      help: "1 when this instance holds the lease (ingress:telegram, ingress:discord)",
      labelNames: ["lease"],
      registers,
      collect() {
        for (const [lease, held] of Object.entries(read()?.leases ?? {})) this.set({ lease }, held ? 1 : 0);
      },
    });
  }

  inbound(msg: InboundMessage): void {
    this.messagesIn.inc({ channel: msg.channel });
  }

  /** The platform took the message. */
  delivered(msg: OutboundMessage): void {
    this.messagesOut.inc({ channel: msg.channel, kind: msg.kind ?? "final" });
  }

  /** The message will never be delivered (the channel manager says why). */
  failed(msg: OutboundMessage, reason: string): void {
    this.messagesFailed.inc({ channel: msg.channel, kind: msg.kind ?? "final", reason });
  }

  turn(report: TurnReport): void {
    this.turnSeconds.observe({ outcome: report.outcome }, report.durationMs / 1000);
    for (const tool of report.tools) {
      this.toolCalls.inc({ tool: tool.name });
      if (!tool.ok) this.toolErrors.inc({ tool: tool.name });
    }
  }

  /**
   * One tool call's approval check (the gate's ApprovalMeter: `outcome` is an ApprovalOutcome of
   * approvals/gate.ts, which sits above the daemon's folder); `waitedMs` when a person was asked.
   */
  approval(outcome: string, waitedMs?: number): void {
    this.approvals.inc({ decision: outcome });
    if (waitedMs !== undefined) this.approvalWait.observe({ decision: outcome }, waitedMs / 1000);
  }

  /** One LLM call's usage, as the usage ledger records it. */
  usage(entry: UsageEntry): void {
    const labels = { model: entry.model, kind: entry.kind };
    this.usageTokens.inc({ ...labels, type: "prompt" }, entry.promptTokens);
    this.usageTokens.inc({ ...labels, type: "completion" }, entry.completionTokens);
    this.usageTokens.inc({ ...labels, type: "cached" }, entry.cachedTokens);
    this.usageTokens.inc({ ...labels, type: "reasoning" }, entry.reasoningTokens);
    // Always touched, so a model without a price shows as 0 rather than missing.
    this.usageCost.inc(labels, entry.costUsd ?? 0);
  }

  /** Wraps a provider so every call is counted. */
  meter(provider: Provider): Provider {
    const llmCalls = this.llmCalls;
    const llmErrors = this.llmErrors;
    const llmTokens = this.llmTokens;
    const promptTokens = this.promptTokens;
    const metrics = this; // eslint-disable-line @typescript-eslint/no-this-alias -- the wrapper reports here
    return {
      get model() {
        return provider.model;
      },
      async chat(req: ChatRequest, signal?: AbortSignal): Promise<ChatResponse> {
        llmCalls.inc({ model: req.model ?? provider.model });
        try {
          const response = await provider.chat(req, signal);
          metrics.lastLlmSuccessAt = Date.now();
          if (response.usage) {
            llmTokens.inc({ type: "prompt" }, response.usage.promptTokens);
            llmTokens.inc({ type: "completion" }, response.usage.completionTokens);
            if (response.usage.promptTokens > 0) promptTokens.observe(response.usage.promptTokens);
          }
          return response;
        } catch (err) {
          const kind = err instanceof LlmError ? err.kind : "other";
          if (kind !== "aborted") {
            llmErrors.inc({ kind });
            metrics.lastLlmFailureAt = Date.now();
          }
          throw err;
        }
      },
    };
  }

  text(): Promise<string> {
    return this.registry.metrics();
  }

  get contentType(): string {
    return this.registry.contentType;
  }
}
