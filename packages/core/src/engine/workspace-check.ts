import { resolve } from "node:path";
import { movedAway } from "../util/real-path";

/**
 * Why the run's workspace may not be used now, or null. The API stored the path with its
 * symlinks followed (inside WORKSPACES_ROOT): one put into the path since (a directory swapped
 * for a link, a link to nothing) would take the run elsewhere, maybe out of the root. An agent
 * can do it (`mv` its workspace, `ln -s /elsewhere`), so it is checked before each thing that
 * works in the workspace: a step's start, each agent, the validation, the snapshot.
 */
export function workspaceMoved(workspace: string): string | null {
  const moved = movedAway(resolve(workspace));
  return moved === null ? null : `${moved}: the run does not follow it`;
}
