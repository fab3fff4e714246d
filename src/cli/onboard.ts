/**
 * `palaver onboard`: writes a small config file (never replacing one
 * silently) and fills the workspace from the templates without touching any
 * file the user already has.
 */
import { chmodSync, copyFileSync, existsSync } from "node:fs";
import { dirname, join } from "node:path";
import { createInterface } from "node:readline/promises";
import type { Command } from "commander";
import { configPathFor } from "../config/load.js";
import { expandHome } from "../config/paths.js";
import { createWorkspace } from "../config/workspace.js";
import { configureLogging } from "../log.js";
import { PRIVATE_FILE_MODE, mkdirPrivateSync, writeFilePrivateSync } from "../util/private-fs.js";
import { addCommonOptions, commonOptions, loadForCli } from "./common.js";

const PROMPT_TIMEOUT_MS = 5 * 60_000;

/**
 * The text of a new config file: only what the user chose (--workspace). Every default stays
 * implicit, so a later version's better default reaches this user too, and the file shows
 * what was actually decided (`palaver config schema` lists every key with its default).
 */
export function newConfigText(workspace?: string): string {
  const config = workspace !== undefined ? { agents: { defaults: { workspace } } } : {};
  return `${JSON.stringify(config, null, 2)}\n`;
}

async function askYesNo(question: string): Promise<boolean> {
  const rl = createInterface({ input: process.stdin, output: process.stdout });
  try {
    const answer = await rl.question(question, { signal: AbortSignal.timeout(PROMPT_TIMEOUT_MS) });
    return /^y(es)?$/i.test(answer.trim());
  } catch {
    return false; // timed out or stdin closed: the safe answer
  } finally {
    rl.close();
  }
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

export function registerOnboardCommand(program: Command): Command {
  const cmd = program
    .command("onboard")
    .description("create a config file and a workspace")
    .option("--force", "replace an existing config file with a new one (the old one is kept as .bak)")
    .action(async (opts: { force?: boolean }, command: Command) => {
      const common = commonOptions(command);
      configureLogging({ verbose: common.verbose });
      const path = configPathFor({ configPath: common.config });
      const out: string[] = [];

      let write = !existsSync(path);
      if (!write) {
        if (opts.force) write = true;
        else if (process.stdin.isTTY && process.stdout.isTTY) {
          write = await askYesNo(
            `${path} already exists. Replace it with a new one (old one kept as .bak)? [y/N] `,
          );
          if (!write) out.push(`Kept the existing config ${path}`);
        } else {
          process.stderr.write(
            `palaver: ${path} already exists; not replacing it.\n` +
              `Run \`palaver onboard --force\` to replace it with a new one (the old file is kept as ${path}.bak).\n`,
          );
          process.exitCode = 1;
          return;
        }
      }
      if (write) {
        const replacing = existsSync(path);
        const workspace = common.workspace !== undefined ? expandHome(common.workspace) : undefined;
        writeConfig(path, newConfigText(workspace), replacing);
        out.push(replacing ? `Replaced ${path} (old one: ${path}.bak)` : `Created ${path}`);
      }

      const loaded = loadForCli(command);
      const setup = createWorkspace(loaded.workspace);
      out.push(
        `Workspace ${loaded.workspace}: ${setup.created.length} file(s) added` +
          (setup.kept.length > 0 ? `, ${setup.kept.length} existing file(s) left as they were` : ""),
      );
      for (const file of setup.created) out.push(`  + ${file}`);

      const flag = common.config !== undefined ? ` --config ${path}` : "";
      const envFile = join(dirname(path), ".env");
      out.push(
        "",
        "Next steps:",
        `  1. Put an API key in ${envFile}, for example`,
        "       PALAVER_PROVIDERS__OPENAI__API_KEY=sk-...",
        `     or set providers.NAME.apiKey (and apiBase for other OpenAI-compatible services) in ${path}.`,
        `  2. Check the result: palaver config check${flag}`,
        `  3. Start talking:    palaver chat${flag}`,
        "",
        "Every other setting has a default; `palaver config schema` lists them all.",
      );
      process.stdout.write(`${out.join("\n")}\n`);
    });
  addCommonOptions(cmd);
  return cmd;
}
