/**
 * A small CLI entry for the child-process tests of `palaver pairing`: the
 * command wired the way src/main.ts wires it, without the other commands.
 */
import { Command } from "commander";
import { addCommonOptions } from "../../src/cli/common.js";
import { registerPairingCommand } from "../../src/cli/pairing.js";

const program = new Command().name("palaver");
addCommonOptions(program);
registerPairingCommand(program);
await program.parseAsync();
