/**
 * The default tool set of the agent, built from the config. Tools that need
 * other services (spawn, cron, MCP) are registered by their owners.
 */
import type { Config } from "../../config/schema.js";
import { createExecTool } from "./exec/exec.js";
import type { ExecSandbox } from "./exec/sandbox.js";
import { createFilesystemTools } from "./filesystem.js";
import { createFindFilesTool } from "./find-files.js";
import { createGrepTool } from "./grep.js";
import { createMessageTool, type MessageToolOptions } from "./message.js";
import { ToolRegistry } from "./registry.js";
import type { Tool } from "./types.js";
import { withUntrustedAttachments } from "./untrusted-files.js";
import { createWebTools } from "./web/web.js";

/** What the exec tool needs beyond the config: the agent's one sandbox decision and the config file to hide. */
export interface ExecSetup {
  sandbox?: ExecSandbox;
  configPath?: string;
}

export function createDefaultTools(
  config: Config,
  workspace: string,
  exec: ExecSetup = {},
  message: Omit<MessageToolOptions, "restrictToWorkspace"> = {},
): ToolRegistry {
  const registry = new ToolRegistry();
  const messageTool = createMessageTool({
    ...message,
    restrictToWorkspace: config.tools.restrictToWorkspace,
  });
  for (const tool of [...workerTools(config, workspace, exec), messageTool]) registry.register(tool);
  return registry;
}

/**
 * The tools of a background worker (subagent): files, shell and web, but
 * nothing that talks to a chat or starts more background work (no message,
 * spawn or cron), so a worker can only report through its final result.
 */
export function createWorkerTools(config: Config, workspace: string, exec: ExecSetup = {}): ToolRegistry {
  const registry = new ToolRegistry();
  for (const tool of workerTools(config, workspace, exec)) registry.register(tool);
  return registry;
}

function workerTools(config: Config, workspace: string, exec: ExecSetup): Tool[] {
  const t = config.tools;
  return [
    ...createFilesystemTools({
      workspace,
      restrictToWorkspace: t.restrictToWorkspace,
      readFileMaxChars: t.readFileMaxChars,
    }).map(withUntrustedAttachments),
    createFindFilesTool({ workspace, restrict: t.restrictToWorkspace }),
    createGrepTool({ workspace, restrict: t.restrictToWorkspace }),
    createExecTool({
      workspace,
      restrictToWorkspace: t.restrictToWorkspace,
      timeoutSeconds: t.exec.timeout,
      maxOutputChars: t.exec.maxOutputChars,
      pathAppend: t.exec.pathAppend,
      denyPatterns: t.exec.denyPatterns,
      env: t.exec.env,
      ...exec,
    }),
    ...createWebTools({
      fetch: {
        allowPrivateNetwork: t.web.fetch.allowPrivateNetwork,
        maxChars: t.web.fetch.maxChars,
        timeoutSeconds: t.web.fetch.timeout,
        maxRedirects: t.web.fetch.maxRedirects,
      },
      search: { apiKey: t.web.search.apiKey, maxResults: t.web.search.maxResults },
      proxy: t.web.proxy,
    }),
  ];
}
