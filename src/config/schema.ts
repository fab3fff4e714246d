/**
 * The configuration schema: the single source of every default.
 * Keys follow nanobot's config.json (camelCase) so its users can move over.
 * `config.example.json` is generated from this file (`npm run config:example`)
 * and a test keeps the two equal.
 */
import * as z from "zod";
import { MAX_TIMER_SECONDS } from "../util/timers.js";
import { hasUrlCredentials } from "../util/url-credentials.js";
import { PLATFORM_SECTIONS } from "./platforms/index.js";
import { withWebDefault } from "./platforms/web.js";
import { apiBaseProblem, isPlaceholderKey } from "./value-checks.js";

/** A duration in seconds; at most what a Node timer can hold (longer ones fire after 1 ms). */
const duration = () => z.number().positive().max(MAX_TIMER_SECONDS);
const seconds = (def: number) => duration().default(def);

/** A regular expression (compiled case-insensitively where used); a bad one is a config error, not a crash later. */
const regexSource = z.string().superRefine((source, ctx) => {
  try {
    new RegExp(source, "i");
  } catch (err) {
    const why = err instanceof Error ? err.message : String(err);
    ctx.addIssue({ code: "custom", message: `not a valid regular expression: ${why}` });
  }
});

export const ProviderConfigSchema = z.object({
  apiKey: z
    .string()
    .superRefine((key, ctx) => {
      // Shown as written: a placeholder is no secret, and seeing it is how the user recognises it.
      if (isPlaceholderKey(key)) {
        ctx.addIssue({
          code: "custom",
          message: `"${key.trim()}" is a placeholder: replace it with your API key`,
        });
      }
    })
    .default("")
    .describe("API key. Prefer PALAVER_PROVIDERS__NAME__API_KEY in .env."),
  apiBase: z
    .string()
    .refine((url) => !hasUrlCredentials(url), "put credentials in apiKey or extraHeaders, not in the URL")
    .superRefine((url, ctx) => {
      const problem = apiBaseProblem(url);
      if (problem) ctx.addIssue({ code: "custom", message: problem });
    })
    .nullable()
    .default(null)
    .describe("Base URL; each known provider has a default."),
  extraHeaders: z.record(z.string(), z.string()).nullable().default(null),
});

export const AgentDefaultsSchema = z.object({
  workspace: z.string().default("~/.palaver/workspace"),
  model: z.string().default("gpt-4o-mini"),
  provider: z
    .string()
    .default("auto")
    .describe(
      'A key of "providers", or "auto": a provider/ prefix of the model, a model keyword, then the first keyed provider (gateways first).',
    ),
  maxTokens: z.number().int().positive().default(8192),
  temperature: z.number().min(0).max(2).default(0.1),
  maxToolIterations: z.number().int().positive().default(40),
  maxContinuations: z
    .number()
    .int()
    .min(0)
    .max(10)
    .default(3)
    .describe(
      'An answer cut off at maxTokens (finish_reason "length") is continued this many times and delivered as one.',
    ),
  memoryWindow: z
    .number()
    .int()
    .min(2)
    .default(100)
    .describe("Most history messages sent to the model (nanobot's bound; the token budget applies as well)."),
  contextWindowTokens: z
    .number()
    .int()
    .min(1000)
    .default(128_000)
    .describe(
      "Context window of models palaver does not know (common families such as gpt-4o, claude and gemini " +
        "have their own); contextWindows overrides it per model.",
    ),
  contextWindows: z
    .record(z.string(), z.number().int().min(1000))
    .default({})
    .describe('Context window per model name, e.g. { "llama3.2": 8192 }.'),
  contextBudget: z
    .number()
    .min(0.1)
    .max(0.95)
    .default(0.6)
    .describe(
      "Share of the window a prompt may use (leaving room for maxTokens of answer); older tool results, " +
        "then the oldest turns, are left out of what is sent to stay inside it. The session keeps everything.",
    ),
  consolidationRatio: z
    .number()
    .min(0.1)
    .max(0.95)
    .default(0.5)
    .describe(
      "History not yet in memory past this share of the window is consolidated into MEMORY.md/HISTORY.md.",
    ),
  maxConcurrentTurns: z.number().int().positive().default(4),
  maxSubagents: z.number().int().positive().default(3).describe("Background subagents running at once."),
  subagentMaxIterations: z.number().int().positive().default(15),
  reasoningEffort: z.enum(["low", "medium", "high"]).nullable().default(null),
  promptFileMaxChars: z
    .number()
    .int()
    .min(1000)
    .default(32_000)
    .describe(
      "Most characters of MEMORY.md and of each bootstrap file (AGENTS.md, SOUL.md ...) put in the system " +
        "prompt; the model is told the rest can be read with read_file.",
    ),
  llm: z
    .object({
      timeout: seconds(120).describe("Seconds one LLM call may take."),
      maxRetries: z.number().int().min(0).max(10).default(3),
      retryBaseDelay: seconds(1).describe("Seconds before the first retry; doubles each time."),
      retryMaxDelay: seconds(30),
      breakerThreshold: z
        .number()
        .int()
        .positive()
        .default(3)
        .describe("Failed calls in a row after which a model is skipped for breakerCooldown seconds."),
      breakerCooldown: seconds(60),
    })
    .prefault({}),
  fallbackModels: z
    .array(z.string())
    .default([])
    .describe("Models of the same provider tried in order when the model above keeps failing."),
  models: z
    .object({
      utility: z
        .string()
        .nullable()
        .default(null)
        .describe(
          "Model for background work: memory consolidation, subagents and named agents without a model of their own. Unset: the main model.",
        ),
      vision: z
        .string()
        .nullable()
        .default(null)
        .describe(
          "Model for a turn that carries images when supportsVision is false. Unset: the main model.",
        ),
    })
    .prefault({}),
  supportsVision: z
    .boolean()
    .default(true)
    .describe("Whether the main model sees images; false sends turns with images to models.vision."),
});

const AgentBindingSchema = z.object({
  match: z.object({
    channel: z.string().min(1),
    chatId: z.string().optional(),
    threadId: z.string().optional(),
    senderId: z.string().optional(),
  }),
  agent: z.string().min(1).describe("The name of an agent file, <workspace>/agents/<name>.md."),
});

export const AgentsSchema = z.object({
  defaults: AgentDefaultsSchema.prefault({}),
  bindings: z
    .array(AgentBindingSchema)
    .default([])
    .describe(
      "Conversations run by a named agent: the first binding whose match fits wins; none: the default agent.",
    ),
  allowSwitch: z
    .boolean()
    .default(false)
    .describe("Whether an owner may switch a conversation to another agent with /agent <name>."),
});

const McpServerSchema = z
  .object({
    enabled: z.boolean().default(true),
    command: z.string().optional().describe("stdio server: the program to run (e.g. npx, uvx)."),
    args: z.array(z.string()).default([]),
    env: z
      .record(z.string(), z.string())
      .default({})
      .describe("stdio server: extra environment variables; ${VAR} is taken from palaver's environment."),
    cwd: z
      .string()
      .optional()
      .describe("stdio server: working folder (a relative path is inside the workspace)."),
    url: z.string().optional().describe("Remote server: its endpoint URL."),
    headers: z
      .record(z.string(), z.string())
      .default({})
      .describe("Remote server: HTTP headers; ${VAR} is taken from palaver's environment."),
    transport: z
      .enum(["streamable-http", "sse"])
      .optional()
      .describe("Remote server: by default Streamable HTTP is tried first, then SSE."),
    toolTimeout: seconds(30).describe("Seconds a tool call may take before it is cancelled."),
    tools: z
      .object({ allow: z.array(z.string()).optional(), deny: z.array(z.string()).optional() })
      .optional()
      .describe("Only these tools (allow) / all but these (deny), by the server's tool names."),
    trusted: z
      .boolean()
      .default(false)
      .describe(
        "Its results are trusted content: reading them does not mark the turn as having read untrusted content.",
      ),
  })
  // nanobot writes "" for the unused one of command and url, so empty counts as unset;
  // when both are set the command wins, as in nanobot.
  .refine((s) => !s.enabled || Boolean(s.command?.trim()) || Boolean(s.url?.trim()), {
    message: 'an MCP server needs a "command" (a local stdio server) or a "url" (a remote server)',
  });

/** One approval rule: first match wins (README, "Approvals"). */
export const ApprovalRuleSchema = z.object({
  tool: z.string().min(1).describe('A tool name or a glob such as "mcp_github_*".'),
  match: regexSource
    .optional()
    .describe("A regular expression tested against the call's arguments as JSON (or against `arg`)."),
  arg: z.string().optional().describe("Test `match` against this one argument instead of all of them."),
  action: z.enum(["allow", "ask", "deny"]),
  reason: z.string().default("").describe("Shown in the chat when the rule asks or denies."),
});

export const ApprovalSchema = z
  .object({
    mode: z
      .enum(["off", "risky", "all"])
      .default("risky")
      .describe(
        "off: never ask; risky: ask for risky calls (default); all: ask for every call but read-only ones.",
      ),
    rules: z
      .array(ApprovalRuleSchema)
      .default([])
      .describe("Checked first, in order; the first that matches decides."),
    timeoutSeconds: seconds(600).describe("No answer within this time means denied."),
  })
  .prefault({});

export const ToolsSchema = z.object({
  approval: ApprovalSchema,
  tiers: z
    .object({
      mode: z
        .enum(["auto", "off"])
        .default("auto")
        .describe(
          '"auto": only the core tools\' schemas go with every call; the rest (MCP, cron, spawn ...) are listed ' +
            'by name and loaded on demand (load_tools), when their schemas would cost more than minDeferredTokens. "off": all sent.',
        ),
      minDeferredTokens: z.number().int().min(0).default(2000),
    })
    .prefault({}),
  restrictToWorkspace: z
    .boolean()
    .default(true)
    .describe("File and exec tools stay inside the workspace (symlinks and .. resolved)."),
  exec: z
    .object({
      timeout: seconds(60),
      maxOutputChars: z.number().int().positive().default(10_000),
      pathAppend: z.string().default(""),
      denyPatterns: z
        .array(regexSource)
        .default([])
        .describe("Extra regular expressions of commands to refuse, added to the built-in ones."),
      sandbox: z
        .enum(["auto", "require", "off"])
        .default("auto")
        .describe(
          "Run commands in bubblewrap: auto (when bwrap works), require (refuse to start without it), off.",
        ),
      network: z
        .boolean()
        .default(true)
        .describe("Sandboxed commands may use the network (false: loopback only)."),
      env: z
        .record(z.string(), z.string())
        .default({})
        .describe(
          "Extra environment variables for commands (${VAR} is taken from palaver's environment); " +
            "otherwise they get only PATH, HOME, LANG, LC_*, TZ and TERM.",
        ),
    })
    .prefault({}),
  web: z
    .object({
      proxy: z.string().nullable().default(null),
      search: z
        .object({ apiKey: z.string().default(""), maxResults: z.number().int().min(1).max(20).default(5) })
        .prefault({}),
      fetch: z
        .object({
          allowPrivateNetwork: z.boolean().default(false),
          maxChars: z.number().int().positive().default(50_000),
          timeout: seconds(30),
          maxRedirects: z.number().int().min(0).max(20).default(5),
        })
        .prefault({}),
    })
    .prefault({}),
  readFileMaxChars: z.number().int().positive().default(128_000),
  toolResultMaxChars: z.number().int().positive().default(16_000),
  mcpServers: z.record(z.string(), McpServerSchema).default({}),
});

/** One section per platform of the list, each defaulted whole (so `enabled` is false). */
type DefaultedSections = {
  [N in keyof typeof PLATFORM_SECTIONS]: z.ZodPrefault<(typeof PLATFORM_SECTIONS)[N]>;
};
const platformSections = Object.fromEntries(
  Object.entries(PLATFORM_SECTIONS).map(([name, schema]) => [name, (schema as z.ZodType).prefault({})]),
) as DefaultedSections;

export const ChannelsSchema = z.object({
  sendProgress: z.boolean().default(true),
  sendToolHints: z.boolean().default(false),
  streaming: z
    .boolean()
    .default(true)
    .describe("Show replies while the model writes them, where the platform can (a live preview)."),
  maxMediaBytes: z
    .number()
    .int()
    .positive()
    .default(20 * 1024 * 1024)
    .describe("Largest attachment downloaded from a chat; bigger ones are refused with a message."),
  ...platformSections,
});

export const TranscriptionSchema = z.object({
  provider: z
    .string()
    .default("")
    .describe('A key of "providers" whose API has /audio/transcriptions (e.g. openai, groq); empty: off.'),
  model: z.string().default("whisper-1"),
});

const HeartbeatSchema = z
  .object({
    enabled: z.boolean().default(true),
    intervalSeconds: duration().int().min(60).optional().describe("Seconds between checks (default 1800)."),
    intervalS: duration().int().min(60).optional().describe("nanobot's name for intervalSeconds."),
  })
  .transform(({ enabled, intervalSeconds, intervalS }) => ({
    enabled,
    intervalSeconds: intervalSeconds ?? intervalS ?? 1800,
  }));

export const GatewaySchema = z.object({
  host: z.string().default("127.0.0.1"),
  port: z.number().int().min(0).max(65535).default(18790),
  heartbeat: HeartbeatSchema.prefault({}),
});

export const CronSchema = z.object({
  enabled: z.boolean().default(true),
  /** Jobs missed while the daemon was down that run at startup; more are skipped (and logged). */
  maxCatchUp: z.number().int().min(0).default(5),
});

const MemorySchema = z.object({
  search: z
    .object({
      scope: z
        .enum(["chat", "all"])
        .default("chat")
        .describe(
          'What memory_search may return besides MEMORY.md and HISTORY.md: "chat" only the current conversation\'s ' +
            'messages, "all" every conversation\'s (one owner talking in many chats).',
        ),
      includeToolResults: z
        .boolean()
        .default(false)
        .describe(
          "Also index what tools returned (pages, command output): more to find, a bigger index. A turn whose " +
            "memory_search returns such a result is marked as having read untrusted content.",
        ),
      embeddings: z
        .object({
          model: z.string().trim().min(1).describe('The embedding model, e.g. "text-embedding-3-small".'),
          provider: z
            .string()
            .trim()
            .min(1)
            .optional()
            .describe("A key of providers whose API has /embeddings; absent: the chat model's provider."),
        })
        .optional()
        .describe(
          "Rank by meaning as well as by words: the provider's /embeddings endpoint, fused with full text. Absent: full text only.",
        ),
    })
    .prefault({}),
});

// Usage and cost (src/usage/): US dollars per million tokens, per model name or glob.
export const PricingSchema = z
  .record(
    z.string().min(1),
    z.object({
      input: z.number().min(0).describe("USD per million prompt tokens."),
      output: z.number().min(0).describe("USD per million completion tokens (reasoning included)."),
      cachedInput: z
        .number()
        .min(0)
        .optional()
        .describe("USD per million prompt tokens served from the provider's cache; default: input."),
    }),
  )
  .default({})
  .describe(
    'Prices per model ("gpt-4o-mini") or glob ("claude-*"); a model without one is counted in tokens, "no price".',
  );

// Spending limits (src/usage/budget.ts): months and days in the host's local time zone.
const BudgetSchema = z
  .object({
    monthlyUsd: z
      .number()
      .positive()
      .optional()
      .describe("USD per calendar month (local time); absent: no limit."),
    dailyUsd: z.number().positive().optional().describe("USD per day (local time); absent: no limit."),
    warnAt: z
      .number()
      .gt(0)
      .max(1)
      .default(0.8)
      .describe("The owners are told once per period when this fraction of a limit is spent."),
    hardStop: z
      .boolean()
      .default(false)
      .describe(
        "At 100 %, conversations get a plain 'budget spent' reply and no LLM call; false: they go on (heartbeat, cron and background tasks pause either way).",
      ),
  })
  .prefault({})
  .describe("Spending limits; a change applies on reload (SIGHUP).");

// Cluster mode (src/cluster/, docs/cluster.md): several gateways on one PostgreSQL.
const ClusterSchema = z
  .object({
    database: z
      .string()
      .trim()
      .regex(
        /^postgres(ql)?:\/\//,
        'a PostgreSQL URL such as "postgres://palaver:secret@db.example:5432/palaver"',
      )
      .optional()
      .describe(
        "The cluster's PostgreSQL (env PALAVER_CLUSTER__DATABASE). Absent: one process, plain files, no database.",
      ),
    turnTimeoutSeconds: duration()
      .int()
      .min(10)
      .default(300)
      .describe("A turn whose instance died is taken up by another after this many seconds."),
  })
  .prefault({});

export const ConfigSchema = z.object({
  $schema: z.string().optional(),
  agents: AgentsSchema.prefault({}),
  providers: z.record(z.string(), ProviderConfigSchema).default({}),
  tools: ToolsSchema.prefault({}),
  channels: ChannelsSchema.prefault({}).transform(withWebDefault),
  gateway: GatewaySchema.prefault({}),
  cron: CronSchema.prefault({}),
  transcription: TranscriptionSchema.prefault({}),
  memory: MemorySchema.prefault({}),
  pricing: PricingSchema,
  budget: BudgetSchema,
  cluster: ClusterSchema,
});

export type Config = z.infer<typeof ConfigSchema>;
export type ProviderConfig = z.infer<typeof ProviderConfigSchema>;
export type ToolsConfig = z.infer<typeof ToolsSchema>;

/** The configuration with every default filled in. */
export function defaultConfig(): Config {
  return ConfigSchema.parse({});
}
