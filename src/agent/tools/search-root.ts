/**
 * Where find_files and grep start: the path the model gave, under the same workspace policy as
 * read_file (workspace-paths.ts) and refused when it is another chat's (chat-privacy.ts), with the
 * chat's folders so the walk below it skips them too.
 */
import { ToolError } from "../../util/errors.js";
import { chatFolders, refuseOtherChats, type ChatFolders } from "./chat-privacy.js";
import type { ToolContext } from "./types.js";
import { realPathLoose, resolveToolPath, type PathPolicy } from "../../workspace/paths.js";
import { stat } from "node:fs/promises";

export async function searchRoot(
  path: string | undefined,
  policy: PathPolicy,
  ctx: ToolContext,
): Promise<{ root: string; folders: ChatFolders }> {
  const shown = path ?? ".";
  const abs = await resolveToolPath(shown, policy);
  await refuseOtherChats(abs, shown, policy.workspace, ctx);
  const [root, folders] = await Promise.all([realPathLoose(abs), chatFolders(policy.workspace, ctx)]);
  if (!(await stat(root).catch(() => null))) throw new ToolError(`not found: ${shown}`);
  return { root, folders };
}
