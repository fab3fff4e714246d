/** A small CLI entry for the child-process tests of `palaver usage`, wired as src/main.ts wires it. */
import { Command } from "commander";
import { addCommonOptions } from "../../src/cli/common.js";
import { registerUsageCommand } from "../../src/cli/usage.js";

const program = new Command().name("palaver");
addCommonOptions(program);
registerUsageCommand(program);
await program.parseAsync();
