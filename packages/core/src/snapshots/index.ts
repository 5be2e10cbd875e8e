export type { CappedText } from "./change-output";
export type { GitOptions, GitResult } from "./git";
export { GitError, gitEnv, runGit } from "./git";
export type { RestoredFile, RestoreResult } from "./restore";
export { restoreWorkspace } from "./restore";
export type { SnapshotTarget, WorkspaceSnapshotsOptions } from "./workspace-snapshots";
export { WorkspaceSnapshots } from "./workspace-snapshots";
