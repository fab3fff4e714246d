/**
 * `palaver web`: the running gateway's web chat link, and on a terminal a QR code of it for a phone.
 * It only reads what the gateway wrote (gateway.json and <state>/web/token): nothing restarts.
 */
import type { Command } from "commander";
import { renderUnicodeCompact } from "uqr";
import { stateDir } from "../config/paths.js";
import { addCommonOptions, loadForCli } from "./common.js";
import { readGatewayStatus, webChatLink } from "./gateway-status.js";

export function registerWebCommand(program: Command): void {
  const cmd = program
    .command("web")
    .description("print the web chat link of the running gateway (and a QR code on a terminal)")
    .option("--no-qr", "print the link alone")
    .action((opts: { qr: boolean }) => {
      const loaded = loadForCli(cmd, { logWarnings: false });
      const state = stateDir(loaded.path);
      const status = readGatewayStatus(state);
      if (!status) {
        process.stderr.write(
          `palaver: no gateway is running for ${loaded.path}; start it with \`npm start\` (palaver gateway)\n`,
        );
        process.exitCode = 1;
        return;
      }
      const link = webChatLink(state, status);
      if (!link) {
        process.stderr.write(
          `palaver: the gateway (pid ${status.pid}) does not serve the web chat; ` +
            "set channels.web.enabled to true and reload it (palaver status shows what runs)\n",
        );
        process.exitCode = 1;
        return;
      }
      // The QR code is for a phone's camera: only where a person looks at the output.
      if (opts.qr && process.stdout.isTTY) process.stdout.write(`${renderUnicodeCompact(link)}\n`);
      process.stdout.write(`${link}\n`);
    });
  addCommonOptions(cmd);
}
