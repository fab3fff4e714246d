/** `palaver gateway`: runs the daemon until SIGINT/SIGTERM, then stops it gracefully and exits 0. */
import type { Command } from "commander";
import { Gateway } from "../gateway.js";
import { logger } from "../log.js";
import { addCommonOptions, loadForCli } from "./common.js";

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
      await gateway.start();
      const signal = await stopRequested;
      log.info({ signal }, "shutting down: finishing running turns");
      await gateway.stop(SHUTDOWN_GRACE_MS);
      clearInterval(keepAlive);
      log.info("stopped");
    });
  addCommonOptions(cmd);
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
