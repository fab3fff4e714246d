/** `palaver gateway`: runs the daemon until SIGINT/SIGTERM, then stops it gracefully and exits 0. */
import type { Command } from "commander";
import { Gateway } from "../gateway.js";
import { loadConfig, secretValues } from "../config/load.js";
import { logger, registerSecrets } from "../log.js";
import { ConfigError } from "../util/errors.js";
import { addCommonOptions, commonOptions, loadForCli } from "./common.js";

/** How long running turns may take to finish after SIGTERM before they are aborted. */
const SHUTDOWN_GRACE_MS = 30_000;

export function registerGatewayCommand(program: Command): void {
  const cmd = program
    .command("gateway")
    .description("run the assistant daemon: channels, agent, cron and heartbeat")
    .action(async () => {
      const loaded = loadForCli(cmd);
      const log = logger("gateway");
      const gateway = new Gateway({ loaded });
      // Timers alone may not hold the event loop open (e.g. cron and heartbeat disabled, no channels).
      const keepAlive = setInterval(() => undefined, 1 << 30);
      // Listen before starting, so a SIGTERM during startup is a clean stop too.
      const stopRequested = waitForSignal();
      const onHangup = () =>
        void reload(gateway, loaded.path, commonOptions(cmd).workspace).catch((err: unknown) =>
          log.error({ err }, "config reload failed; still running"),
        );
      process.on("SIGHUP", onHangup);
      await gateway.start();
      const signal = await stopRequested;
      log.info({ signal }, "shutting down: finishing running turns");
      process.off("SIGHUP", onHangup);
      await gateway.stop(SHUTDOWN_GRACE_MS);
      clearInterval(keepAlive);
      log.info("stopped");
    });
  addCommonOptions(cmd);
}

/** SIGHUP: re-read the config; when it is invalid, keep running with the old one and say why. */
async function reload(gateway: Gateway, configPath: string, workspace: string | undefined): Promise<void> {
  const log = logger("gateway");
  let next;
  try {
    next = loadConfig({ configPath, workspace });
  } catch (err) {
    if (err instanceof ConfigError) {
      log.error(
        { problems: err.problems },
        `config reload refused, keeping the running config: ${err.message}`,
      );
      return;
    }
    throw err;
  }
  for (const warning of next.warnings) log.warn(warning);
  registerSecrets(secretValues(next.config));
  log.info("config reloaded");
  await gateway.reload(next);
}

function waitForSignal(): Promise<NodeJS.Signals> {
  return new Promise((resolve) => {
    const onSignal = (signal: NodeJS.Signals) => {
      process.off("SIGINT", onSignal);
      process.off("SIGTERM", onSignal);
      resolve(signal);
    };
    process.on("SIGINT", onSignal);
    process.on("SIGTERM", onSignal);
  });
}
