/** A small CLI entry for the child-process tests of `palaver mcp`, wired the way src/main.ts wires it. */
import { Command } from "commander";
import { addCommonOptions } from "../../src/cli/common.js";
import { registerMcpCommand } from "../../src/cli/mcp.js";

const program = new Command().name("palaver");
addCommonOptions(program);
registerMcpCommand(program);
await program.parseAsync();
