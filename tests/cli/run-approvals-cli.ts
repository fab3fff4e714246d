/**
 * A small CLI entry for the child-process tests of `palaver approvals`: the
 * command wired the way src/main.ts wires it, without the other commands.
 */
import { Command } from "commander";
import { registerApprovalsCommand } from "../../src/cli/approvals.js";
import { addCommonOptions } from "../../src/cli/common.js";

const program = new Command().name("palaver");
addCommonOptions(program);
registerApprovalsCommand(program);
await program.parseAsync();
