import { resolve } from "node:path";
import { leadsElsewhere } from "../util/real-path";

/**
 * Why the run's workspace may not be used now, or null. The API stored the path with its
 * symlinks followed (inside WORKSPACES_ROOT): one put into the path since (a directory swapped
 * for a link, a link to nothing) would take the run elsewhere, maybe out of the root. An agent
 * can do it (`mv` its workspace, `ln -s /elsewhere`), so it is checked before each thing that
 * works in the workspace: a step's start, each agent, the validation, the snapshot.
 */
export function workspaceMoved(workspace: string): string | null {
  const path = resolve(workspace);
  const where = leadsElsewhere(path);
  if (where === null) return null;
  return `the workspace ${path} leads to ${where} now (a symlink was put in its path): the run does not follow it`;
}
