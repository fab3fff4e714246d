/** A small CLI entry for the child-process tests of `palaver service`, wired the way src/main.ts wires it. */
import { Command } from "commander";
import { addCommonOptions } from "../../src/cli/common.js";
import { registerServiceCommand } from "../../src/cli/service.js";

const program = new Command().name("palaver");
addCommonOptions(program);
registerServiceCommand(program);
await program.parseAsync();
