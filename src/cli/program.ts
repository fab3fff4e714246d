/** The palaver CLI (src/main.ts imports it once the Node version is checked). One file per command in cli/. */
import { Command } from "commander";
import * as z from "zod";
import { registerApprovalsCommand } from "./approvals.js";
import { registerChatCommand } from "./chat.js";
import { registerClusterCommand } from "./cluster.js";
import { addCommonOptions, exitOnRefusedConfig } from "./common.js";
import { registerConfigCommand } from "./config.js";
import { registerCronCommand } from "./cron.js";
import { registerMcpCommand } from "./mcp.js";
import { registerServiceCommand } from "./service.js";
import { registerGatewayCommand } from "./gateway.js";
import { registerOutboxCommand } from "./outbox.js";
import { registerOnboardCommand } from "./onboard.js";
import { registerPairingCommand } from "./pairing.js";
import { registerStatusCommand } from "./status.js";
import { registerWebCommand } from "./web.js";
import { registerAgentsCommand } from "./agents.js";
import { registerMemoryCommand } from "./memory.js";
import { registerUsageCommand } from "./usage.js";
import { registerDoctorCommand } from "./doctor.js";
import { registerBackupCommand } from "./backup.js";
import { palaverVersion } from "../util/package-root.js";
import { logger } from "../log.js";
import { ConfigError } from "../util/errors.js";

// An unhandled rejection is a bug: log it and exit non-zero so systemd restarts us.
process.on("unhandledRejection", (reason) => {
  logger().fatal({ err: reason }, "unhandled promise rejection");
  process.exit(1);
});

// zod compiles a fast path for an object schema the first time it parses with it (new Function),
// to save ~2 µs per parse afterwards; palaver parses little per message. This reaches the schemas
// built from here on; those built as their modules load decide for themselves (config/load.ts).
z.config({ jitless: true });

const program = new Command()
  .name("palaver")
  .description("palaver: a self-hosted personal AI assistant")
  .version(palaverVersion());
addCommonOptions(program);
registerGatewayCommand(program);
registerChatCommand(program);
registerOnboardCommand(program);
registerStatusCommand(program);
registerWebCommand(program);
registerAgentsCommand(program);
registerMemoryCommand(program);
registerUsageCommand(program);
registerDoctorCommand(program);
registerBackupCommand(program);
registerConfigCommand(program);
registerCronCommand(program);
registerApprovalsCommand(program);
registerPairingCommand(program);
registerOutboxCommand(program);
registerClusterCommand(program);
registerMcpCommand(program);
registerServiceCommand(program);

try {
  await program.parseAsync();
} catch (err) {
  // A config that validates but cannot work (no usable LLM provider, a channel without its token)
  // is still a config error: a plain message and EX_CONFIG, so systemd does not restart in a loop.
  if (err instanceof ConfigError) exitOnRefusedConfig(err);
  // Anything else (a folder that cannot be created...) is one clear line; the stack is for --verbose.
  if (process.argv.includes("--verbose")) {
    process.stderr.write(`palaver: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  } else {
    process.stderr.write(`palaver: ${oneLine(err)} (--verbose shows the details)\n`);
  }
  process.exit(1);
}

/** The error's message and those of its causes that add something, on one line. */
function oneLine(err: unknown): string {
  const parts: string[] = [];
  for (
    let e: unknown = err;
    e !== undefined && parts.length < 5;
    e = e instanceof Error ? e.cause : undefined
  ) {
    const message = e instanceof Error ? e.message : typeof e === "string" ? e : JSON.stringify(e);
    const text = (message ?? "").replace(/\s*\n\s*/g, " ").trim();
    if (text && !parts.some((p) => p.includes(text))) parts.push(text);
  }
  return parts.join(": ");
}
