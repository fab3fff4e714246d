/** `palaver gateway`: the daemon. Runs the agent loop (and, in later issues, channels, cron, heartbeat). */
import type { Command } from "commander";
import { createAgent } from "../agent/index.js";
import { MessageBus } from "../bus/bus.js";
import { createWorkspace } from "../config/workspace.js";
import { logger } from "../log.js";
import { addCommonOptions, loadForCli } from "./common.js";

/** How long running turns may take to finish after SIGTERM before they are aborted. */
const SHUTDOWN_GRACE_MS = 30_000;

export function registerGatewayCommand(program: Command): void {
  const cmd = program
    .command("gateway")
    .description("run the assistant daemon")
    .action(async () => {
      const loaded = loadForCli(cmd);
      const log = logger("gateway");
      createWorkspace(loaded.workspace);
      const bus = new MessageBus();
      const { loop, provider } = createAgent({ config: loaded.config, workspace: loaded.workspace, bus });
      loop.start();

      const channels = loaded.config.channels;
      const enabled = (["telegram", "slack", "discord"] as const).filter((name) => channels[name].enabled);
      if (enabled.length === 0) {
        log.warn(
          "no channels enabled: set channels.telegram.enabled (or slack, discord) in the config; " +
            "use `palaver chat` to talk in the terminal meanwhile",
        );
      } else {
        log.warn({ channels: enabled }, "these channels are enabled but not available in this version yet");
      }
      log.info({ workspace: loaded.workspace, model: provider.model }, "gateway running");

      // Nothing else holds the event loop open until channels and the health server arrive.
      const keepAlive = setInterval(() => undefined, 1 << 30);
      const signal = await waitForSignal();
      clearInterval(keepAlive);
      log.info({ signal }, "shutting down: finishing running turns");
      await loop.shutdown(SHUTDOWN_GRACE_MS);
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
