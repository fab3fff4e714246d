/**
 * What a running gateway tells the CLI: `<state>/gateway.json` (0600), written once it runs and
 * removed when it stops, holds its pid, since when it runs, its HTTP address and the web chat's page
 * (without the token: that stays in <state>/web/token). `palaver status` and `palaver web` read it,
 * and trust it only while the state lock (lock.ts) says that pid still holds the folder: a file a
 * killed gateway left behind is then ignored.
 */
import { readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import { tokenFileOf } from "../channels/web/auth.js";
import { writeFilePrivateSync } from "../util/private-fs.js";
import { runningGatewayPid } from "../daemon/lock.js";

export interface GatewayStatus {
  pid: number;
  /** ISO time the gateway started running. */
  since: string;
  /** The HTTP server's address (`http://127.0.0.1:18790`), when it listens. */
  address?: string;
  /** The web chat's page, when the web chat runs (the token is not in it). */
  webChat?: string;
  /** Whether the web chat's token is channels.web.token (then the link cannot carry it). */
  configuredToken?: boolean;
}

function statusFileOf(stateDir: string): string {
  return join(stateDir, "gateway.json");
}

export function writeGatewayStatus(stateDir: string, status: GatewayStatus): void {
  writeFilePrivateSync(statusFileOf(stateDir), `${JSON.stringify(status)}\n`);
}

export function removeGatewayStatus(stateDir: string): void {
  rmSync(statusFileOf(stateDir), { force: true });
}

/** The gateway running on `stateDir`, or undefined when none does (its lock decides, not the file). */
export function readGatewayStatus(stateDir: string): GatewayStatus | undefined {
  const pid = runningGatewayPid(stateDir);
  if (pid === null) return undefined;
  try {
    const status = JSON.parse(readFileSync(statusFileOf(stateDir), "utf8")) as GatewayStatus;
    // Another run's file (this one is still starting): only the pid is known for sure.
    return status.pid === pid ? status : { pid, since: "" };
  } catch {
    return { pid, since: "" };
  }
}

/**
 * The link that opens the web chat signed in (`…/#token=…`), or undefined when it does not run. A
 * configured token is not printed: the person who set it knows it.
 */
export function webChatLink(stateDir: string, status: GatewayStatus | undefined): string | undefined {
  if (!status?.webChat) return undefined;
  if (status.configuredToken) return status.webChat;
  try {
    const token = readFileSync(tokenFileOf(stateDir), "utf8").trim();
    return token ? `${status.webChat}#token=${token}` : status.webChat;
  } catch {
    return status.webChat;
  }
}

/** The page the web chat serves for an HTTP address: a wildcard bind is opened on loopback. */
export function webChatPage(address: string, host: string): string {
  const wildcard = host === "0.0.0.0" || host === "::" || host === "";
  return `${wildcard ? address.replace(/\/\/[^/]+:/, "//127.0.0.1:") : address}/`;
}
