/** `palaver gateway`: runs the daemon until SIGINT/SIGTERM, then stops it gracefully and exits 0. */
import type { Command } from "commander";
import { Gateway } from "../gateway.js";
import { loadConfig } from "../config/load.js";
import { secretValues } from "../config/secrets.js";
import {
  notifyReady,
  notifyReloading,
  notifyStatus,
  notifyStopping,
  startWatchdog,
} from "../daemon/systemd-notify.js";
import { describeSandbox } from "../agent/tools/exec/sandbox.js";
import type { LoadedConfig } from "../config/load.js";
import { stateDir } from "../config/paths.js";
import { describeProviderChoice, formatProviderChoice } from "../llm/provider-report.js";
import { logger, registerSecrets } from "../log.js";
import { ConfigError } from "../util/errors.js";
import { addCommonOptions, commonOptions, loadForCli } from "./common.js";
import {
  removeGatewayStatus,
  webChatLink,
  webChatPage,
  writeGatewayStatus,
  type GatewayStatus,
} from "./gateway-status.js";
import { formatStartSummary } from "./start-summary.js";

/** How long running turns may take to finish after SIGTERM before they are aborted. */
const SHUTDOWN_GRACE_MS = 30_000;

export function registerGatewayCommand(program: Command): void {
  const cmd = program
    .command("gateway")
    .description("run the assistant daemon: channels, agent, cron and heartbeat")
    .action(async () => {
      // A person at a terminal gets a short summary on stdout and only warnings from the log; a
      // service or a pipe (stdout not a terminal) and --verbose keep the structured log as it was.
      const human = process.stdout.isTTY === true && !commonOptions(cmd).verbose;
      const loaded = loadForCli(cmd, human ? { level: "warn" } : {});
      const state = stateDir(loaded.path);
      // Early: this also removes NOTIFY_SOCKET from the environment tools and MCP servers inherit.
      void notifyStatus("starting");
      const log = logger("gateway");
      const gateway = await Gateway.create({ loaded });
      // Timers alone may not hold the event loop open (e.g. cron and heartbeat disabled, no channels);
      // exitStopped ends the process.
      setInterval(() => undefined, 1 << 30);
      // Listen before starting, so a SIGTERM during startup is a clean stop too.
      const stopRequested = waitForSignal();
      const onHangup = () =>
        void reload(gateway, loaded.path, commonOptions(cmd).workspace).catch((err: unknown) =>
          log.error({ err }, "config reload failed; still running"),
        );
      process.on("SIGHUP", onHangup);
      const started = gateway.start();
      const early = await Promise.race([started.then(() => null), stopRequested]);
      if (early) {
        // Ctrl+C or SIGTERM while channels connect: stop now rather than after their connect timeouts.
        // A turn already running (a reminder due at startup) still gets its grace to finish and be saved.
        log.info({ signal: early }, "stop requested while starting: pending connections are abandoned");
        process.off("SIGHUP", onHangup);
        await gateway.stop(SHUTDOWN_GRACE_MS);
        exitStopped(state);
      }
      const status = runningStatus(gateway, loaded);
      try {
        writeGatewayStatus(state, status);
      } catch (err) {
        // `palaver status` then knows only the pid (from the lock); the gateway itself is fine.
        log.warn({ err }, "could not write gateway.json in the state folder");
      }
      if (human) process.stdout.write(summary(gateway, loaded, status));
      void notifyReady(readyStatus(gateway));
      const stopWatchdog = startWatchdog();
      const signal = await stopRequested;
      void notifyStopping("stopping: finishing running turns");
      log.info({ signal }, "shutting down: finishing running turns");
      process.off("SIGHUP", onHangup);
      await gateway.stop(SHUTDOWN_GRACE_MS);
      stopWatchdog();
      exitStopped(state);
    });
  addCommonOptions(cmd);
}

/**
 * Ends the process once the gateway has stopped: whatever a library left running (Slack's Web API
 * client retries an unreachable Slack for over a minute and takes no signal) must not keep a
 * stopped daemon alive. Logs are written synchronously, so nothing is lost.
 */
function exitStopped(state: string): never {
  removeGatewayStatus(state);
  logger("gateway").info("stopped");
  process.exit();
}

/** SIGHUP: re-read the config; when it is invalid, keep running with the old one and say why. */
async function reload(gateway: Gateway, configPath: string, workspace: string | undefined): Promise<void> {
  const log = logger("gateway");
  void notifyReloading("reloading config");
  try {
    const next = loadConfig({ configPath, workspace });
    for (const warning of next.warnings) log.warn(warning);
    registerSecrets(secretValues(next.config));
    log.info("config reloaded");
    await gateway.reload(next);
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    log.error(
      { problems: err.problems },
      `config reload refused, keeping the running config: ${err.message}`,
    );
  } finally {
    void notifyReady(readyStatus(gateway));
  }
}

/** What `palaver status` and `palaver web` read while this gateway runs. */
function runningStatus(gateway: Gateway, loaded: LoadedConfig): GatewayStatus {
  const address = gateway.health.url;
  const web = gateway.channels.status().find((c) => c.name === "web");
  return {
    pid: process.pid,
    since: new Date().toISOString(),
    ...(address ? { address } : {}),
    ...(address && web ? { webChat: webChatPage(address, gateway.health.host) } : {}),
    ...(web && loaded.config.channels.web.token.trim() !== "" ? { configuredToken: true } : {}),
  };
}

function summary(gateway: Gateway, loaded: LoadedConfig, status: GatewayStatus): string {
  const sandbox = gateway.agent.execSandbox.current;
  return formatStartSummary({
    pid: process.pid,
    llm: formatProviderChoice(describeProviderChoice(loaded.config)),
    channels: gateway.channels.status(),
    ...(sandbox ? { sandbox: describeSandbox(sandbox) } : {}),
    ...(status.webChat ? { webChat: webChatLink(stateDir(loaded.path), status) } : {}),
    ...(status.configuredToken ? { configuredToken: true } : {}),
  });
}

function readyStatus(gateway: Gateway): string {
  const channels = gateway.channels.status().map((c) => `${c.name} ${c.state}`);
  return `running: ${channels.length ? channels.join(", ") : "no channels"}`;
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
