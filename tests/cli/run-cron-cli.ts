/**
 * A small CLI entry for the child-process tests of `palaver cron`: the command
 * wired the way src/main.ts wires it, without the other commands.
 */
import { Command } from "commander";
import { addCommonOptions } from "../../src/cli/common.js";
import { registerCronCommand } from "../../src/cli/cron.js";

const program = new Command().name("palaver");
addCommonOptions(program);
registerCronCommand(program);
await program.parseAsync();
