/**
 * `palaver onboard`: writes a starting config file the user edits (never
 * replacing one without --force) and fills the workspace from the templates
 * without touching any file the user already has. Run again, it only adds
 * what is missing.
 */
import { chmodSync, copyFileSync, existsSync } from "node:fs";
import { dirname, join } from "node:path";
import type { Command } from "commander";
import { configPathFor } from "../config/load.js";
import { expandHome } from "../config/paths.js";
import { defaultConfig } from "../config/schema.js";
import { createWorkspace } from "../config/workspace.js";
import { configureLogging } from "../log.js";
import { PRIVATE_FILE_MODE, mkdirPrivateSync, writeFilePrivateSync } from "../util/private-fs.js";
import { addCommonOptions, commonOptions, loadForCli } from "./common.js";

/**
 * The text of a new config file: the few keys a newcomer edits (the provider and model, a key
 * slot, a chat platform left off) with their default values, so there is something to edit;
 * every other default stays implicit, so a later version's better default reaches this user
 * too (`palaver config schema` and config.example.json list every key). JSON has no comments:
 * what to change is said in the next steps onboard prints.
 */
export function newConfigText(workspace?: string): string {
  const defaults = defaultConfig();
  const config = {
    agents: {
      defaults: {
        ...(workspace !== undefined ? { workspace } : {}),
        provider: defaults.agents.defaults.provider,
        model: defaults.agents.defaults.model,
      },
    },
    providers: { openai: { apiKey: "" } },
    channels: { telegram: { enabled: false, token: "", allowFrom: [] as string[] } },
  };
  return `${JSON.stringify(config, null, 2)}\n`;
}

function writeConfig(path: string, text: string, replace: boolean): void {
  mkdirPrivateSync(dirname(path));
  if (replace && existsSync(path)) {
    copyFileSync(path, `${path}.bak`);
    // The old file may hold keys and may have been 0644 (copyFile keeps its mode).
    chmodSync(`${path}.bak`, PRIVATE_FILE_MODE);
  }
  // 0600, also when replacing a file that was not: it may hold API keys.
  writeFilePrivateSync(path, text, replace ? "w" : "wx");
}

/** What to do next, for a person who has just run onboard. */
function nextSteps(path: string, flag: string): string[] {
  const envFile = join(dirname(path), ".env");
  return [
    "",
    "Next steps:",
    `  1. Put your API key in ${envFile} (chmod 600), for example`,
    "       PALAVER_PROVIDERS__OPENAI__API_KEY=<the key your provider gave you>",
    `     Another provider: set agents.defaults.provider and model in ${path} (README: "Providers");`,
    '     a local model needs no key: "provider": "ollama" and "providers": { "ollama": {} }.',
    `  2. Check it:         palaver config check${flag}`,
    `  3. Start palaver:    npm start (in the clone) or palaver gateway${flag},`,
    "                      then open the web chat link it prints",
    `     or talk here:     palaver chat${flag}`,
    `  Telegram, Slack, Discord: set channels.NAME.enabled, its token and allowFrom in ${path}.`,
    "",
    "Every other setting has a default; `palaver config schema` lists them all.",
  ];
}

export function registerOnboardCommand(program: Command): Command {
  const cmd = program
    .command("onboard")
    .description("create a config file and a workspace; run again, add only what is missing")
    .option("--force", "replace an existing config file with a new one (the old one is kept as .bak)")
    .action((opts: { force?: boolean }, command: Command) => {
      const common = commonOptions(command);
      configureLogging({ verbose: common.verbose });
      const path = configPathFor({ configPath: common.config });
      const out: string[] = [];

      const exists = existsSync(path);
      if (!exists || opts.force) {
        const workspace = common.workspace !== undefined ? expandHome(common.workspace) : undefined;
        writeConfig(path, newConfigText(workspace), exists);
        out.push(exists ? `Replaced ${path} (old one: ${path}.bak)` : `Created ${path}`);
      } else {
        // The README's snippets and hand-written configs are the user's: onboard completes around them.
        out.push(`Kept your config ${path} (\`palaver onboard --force\` replaces it, keeping a .bak)`);
      }

      const loaded = loadForCli(command);
      const setup = createWorkspace(loaded.workspace);
      out.push(
        `Workspace ${loaded.workspace}: ${setup.created.length} file(s) added` +
          (setup.kept.length > 0 ? `, ${setup.kept.length} existing file(s) left as they were` : ""),
      );
      for (const file of setup.created) out.push(`  + ${file}`);
      out.push(...nextSteps(path, common.config !== undefined ? ` --config ${path}` : ""));
      process.stdout.write(`${out.join("\n")}\n`);
    });
  addCommonOptions(cmd);
  return cmd;
}
