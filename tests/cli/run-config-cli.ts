/**
 * A small CLI entry for the child-process tests: the config, onboard and status
 * commands wired the way src/main.ts wires them, without the other commands.
 */
import { Command } from "commander";
import { addCommonOptions } from "../../src/cli/common.js";
import { registerConfigCommand } from "../../src/cli/config.js";
import { registerOnboardCommand } from "../../src/cli/onboard.js";
import { registerStatusCommand } from "../../src/cli/status.js";

const program = new Command().name("palaver");
addCommonOptions(program);
registerConfigCommand(program);
registerOnboardCommand(program);
registerStatusCommand(program);
await program.parseAsync();
