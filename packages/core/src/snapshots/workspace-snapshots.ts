import { existsSync } from "node:fs";
import { join, resolve } from "node:path";
import { type DiffTreeOutput, DiffTreeProcesses } from "./diff-tree-process";
import { GitError, type GitResult, gitEnv, runGit } from "./git";
import { isSha1, type ObjectStore, readCommitHeader, writeCommit, writeRef } from "./git-objects";
import { writeTreeFromIndex } from "./index-tree";
import { MadeAhead } from "./made-ahead";
import { ensureSnapshotAttributes, initSnapshotRepository } from "./snapshot-repository";
import { isWriter, markWriter } from "./store-writers";
import { prepareWorkspaceIndex, releaseKilledLock, workspaceIndexFile } from "./workspace-index";
import {
  filesFromIndex,
  isEmptyDir,
  type ScanLimits,
  scanWorkspace,
  type WorkspaceFiles,
} from "./workspace-scan";

export interface WorkspaceSnapshotsOptions {
  /** Where the snapshot git dirs live: one bare repository per session, `<root>/<sessionId>.git`. */
  root: string;
  /** PATH to find git on. @defaultValue /usr/local/bin:/usr/bin:/bin */
  path?: string;
  /** @defaultValue 60000 — per git command */
  timeoutMs?: number;
  /** When a workspace is left to `git add -A` rather than scanned in-process. */
  scanLimits?: ScanLimits;
  /**
   * How many files to keep made ahead for the objects of the next snapshots, with the store's
   * object directories (spare-files.ts) and a git dir for the next new session
   * (spare-repositories.ts), until `close`; 0: none, each is made when it is needed. The files
   * the snapshots take are made again when the owner calls `makeAhead`.
   * @defaultValue 0
   */
  spareFiles?: number;
}

export interface SnapshotTarget {
  sessionId: string;
  runId: string;
  workspace: string;
}

/** How long a session's diff-tree process waits for the next iteration's diffs. */
const DIFF_TREE_IDLE_MS = 30_000;

const SESSION_ID = /^[A-Za-z0-9_-]{1,64}$/;
/** Run ids are ULIDs; this keeps anything else out of a ref name. */
const RUN_ID = /^[0-9A-Z]{26}$/;

/**
 * Snapshots of run workspaces in git, without touching the workspace's own repository: a
 * separate bare git dir per session outside the workspace, used with
 * `--git-dir=<dir> --work-tree=<workspace>`. A snapshot is `add -A` (honouring the
 * workspace's `.gitignore`; its `.git` is never added) — or the same read in-process once the
 * workspace's previous state is known (workspace-scan.ts) —, `write-tree` and `commit-tree`
 * with the previous snapshot as parent, kept reachable under `refs/looprun/<runId>`.
 */
/** What a snapshot of a workspace leaves for the next one (see workspace-scan.ts). */
interface ScanMemory {
  /** Its files as the snapshot saw them. */
  files: WorkspaceFiles;
  /** The tracked-but-ignored files its index on disk was last written with (see `take`). */
  indexedIgnored: string;
}

export class WorkspaceSnapshots {
  /** The directory of the sessions' git dirs (and of files shared by them). */
  readonly root: string;
  private readonly env: Record<string, string>;
  private readonly timeoutMs: number;
  /** Per git dir: object ids known to be stored, files made ahead (see writeLooseObject). */
  private readonly objectStores = new Map<string, ObjectStore>();
  /** What is made ahead of need (with `spareFiles`), or null. */
  private readonly ahead: MadeAhead | null;
  /** Per git dir and workspace: its files as the last snapshot saw them (see workspace-scan.ts). */
  private readonly scans = new Map<string, ScanMemory>();
  private readonly limits: ScanLimits;
  /** How the workspaces were read so far: in-process scans and `git add -A` runs. */
  readonly reads = { scans: 0, gitAdds: 0 };
  /** How diff-tree requests were answered: by a long-lived process, or by a git of their own. */
  readonly diffTrees = { longLived: 0, oneShot: 0 };
  /** The trees of the snapshots this process took (commit id → tree id). */
  private readonly commitTrees = new Map<string, string>();
  private readonly diffTreeProcesses = new DiffTreeProcesses();
  /** Git dirs whose `info/attributes` this process has seen to (see ensureRepository). */
  private readonly attributed = new Set<string>();

  constructor(opts: WorkspaceSnapshotsOptions) {
    this.root = resolve(opts.root);
    this.env = gitEnv(opts.path, this.root);
    this.timeoutMs = opts.timeoutMs ?? 60_000;
    this.limits = opts.scanLimits ?? {};
    this.ahead = (opts.spareFiles ?? 0) > 0 ? new MadeAhead(this.root, opts.spareFiles ?? 0) : null;
  }

  gitDir(sessionId: string): string {
    // Session ids are validated on submit; this keeps a bad one from naming another directory.
    if (!SESSION_ID.test(sessionId))
      throw new Error(`not a session id: ${JSON.stringify(sessionId)}`);
    return join(this.root, `${sessionId}.git`);
  }

  /**
   * Records the workspace as it is now; returns the snapshot (commit) id. The workspace is
   * read in-process when this process knows its previous state (see workspace-scan.ts), else
   * by `git add -A`; `opts.index` asks for git's way, which leaves the workspace's index equal
   * to the workspace (a restore needs that).
   */
  async take(
    target: SnapshotTarget,
    label: string,
    parent: string | null,
    signal?: AbortSignal,
    ref = `refs/looprun/${target.runId}`,
    opts: { index?: boolean } = {},
  ): Promise<string> {
    // Every write of objects starts here: `looprun gc` is refused while this process lives (and
    // one that runs is waited for, the first time).
    if (!isWriter(this.root)) await markWriter(this.root, signal);
    const gitDir = this.ensureRepository(target.sessionId);
    const key = `${gitDir}\0${resolve(target.workspace)}`;
    const store = this.objectsOf(gitDir);
    // An empty workspace (one the worker has just made) is nothing to `git add -A`: a scan
    // from no files at all gives its tree.
    const last = this.scans.get(key);
    const previous = last?.files ?? (isEmptyDir(target.workspace) ? new Map() : undefined);
    this.scans.delete(key);
    let tree: string | null = null;
    if (previous !== undefined && opts.index !== true) {
      const scanned = scanWorkspace(target.workspace, previous, gitDir, store, this.limits);
      if (scanned !== null) {
        tree = scanned.tree;
        this.reads.scans++;
        // The workspace's index is git's memory of what is tracked: a `git add -A` of another
        // process (a rollback's `before`, a restarted worker) would drop a file tracked since
        // and ignored now. It is written (from the tree) when the set of such files changes.
        if (scanned.trackedIgnored !== (last?.indexedIgnored ?? "")) {
          await this.git(gitDir, target.workspace, ["read-tree", tree], signal);
        }
        this.remember(key, scanned.files, scanned.trackedIgnored);
      }
    }
    tree ??= await this.addAll(gitDir, target.workspace, key, signal);
    const message = `looprun ${target.runId} ${label}`;
    const git = (args: string[]) => this.git(gitDir, target.workspace, args, signal);
    if (isSha1(tree) && (parent === null || isSha1(parent))) {
      // The commit and the ref without two more git processes (see git-objects.ts).
      const commit = writeCommit(gitDir, { tree, parent, message }, store);
      writeRef(gitDir, ref, commit);
      if (this.commitTrees.size >= 10_000) this.commitTrees.clear();
      this.commitTrees.set(commit, tree);
      return commit;
    }
    const commit = (
      await git(["commit-tree", tree, ...(parent ? ["-p", parent] : []), "-m", message])
    ).stdout.trim();
    await git(["update-ref", ref, commit]);
    return commit;
  }

  /** `git add -A` and the tree of the index; remembers the files for the next scan. */
  private async addAll(
    gitDir: string,
    workspace: string,
    key: string,
    signal?: AbortSignal,
  ): Promise<string> {
    const index = workspaceIndexFile(gitDir, workspace);
    // Unreadable files are skipped (git still exits non-zero); the snapshot holds the rest.
    const args = ["add", "-A", "--ignore-errors"];
    const add = await this.gitRun(gitDir, workspace, args, { cwd: workspace, signal });
    if (add.exitCode === null) throw new GitError(args, add);
    this.reads.gitAdds++;
    const written = await writeTreeFromIndex(gitDir, this.objectsOf(gitDir), index);
    if (written === null)
      return (await this.git(gitDir, workspace, ["write-tree"], signal)).stdout.trim();
    // Only a clean add says what the workspace holds: an unreadable file is git's to retry.
    const files = add.exitCode === 0 ? filesFromIndex(written.index, this.limits) : null;
    // git's own index: what it tracks, ignored or not (taken as none, at worst one read-tree).
    if (files !== null) this.remember(key, files, "");
    return written.tree;
  }

  private remember(key: string, files: WorkspaceFiles, indexedIgnored: string): void {
    // A bound on what a long-lived worker keeps (workspaces come and go): forgetting one only
    // costs its next snapshot a `git add -A`.
    if (this.scans.size >= 64) this.scans.delete(this.scans.keys().next().value ?? "");
    this.scans.set(key, { files, indexedIgnored });
  }

  /**
   * Runs git with the session's snapshot git dir (and a work tree, when given); throws a
   * `GitError` when it fails. For the snapshot operations that live in their own files.
   */
  gitIn(
    sessionId: string,
    workTree: string | null,
    args: string[],
    signal?: AbortSignal,
    opts: { stdin?: string; maxStdoutBytes?: number } = {},
  ): Promise<GitResult> {
    return this.git(
      this.gitDir(sessionId),
      workTree,
      args,
      signal,
      opts.maxStdoutBytes,
      opts.stdin,
    );
  }

  /**
   * `git diff-tree --stdin ARGS` of `pairs` (lines of `TREE TREE`): from the session's
   * long-lived diff-tree process (diff-tree-process.ts) when it answers, else from a git
   * process of its own, which throws a `GitError` when git fails.
   */
  async diffTree(
    sessionId: string,
    args: string[],
    pairs: string,
    maxStdoutBytes: number,
    signal?: AbortSignal,
  ): Promise<DiffTreeOutput> {
    const full = this.base(this.gitDir(sessionId), null, ["diff-tree", "--stdin", ...args]);
    const proc = this.diffTreeProcesses.get(full.join("\0"), {
      args: full,
      env: this.env,
      timeoutMs: this.timeoutMs,
      idleMs: DIFF_TREE_IDLE_MS,
    });
    const output = await proc.run(pairs, maxStdoutBytes, signal);
    if (output !== null) {
      this.diffTrees.longLived++;
      return output;
    }
    this.diffTrees.oneShot++;
    const stdin = pairs.endsWith("\n") ? pairs : `${pairs}\n`;
    return this.gitIn(sessionId, null, ["diff-tree", "--stdin", ...args], signal, {
      stdin,
      maxStdoutBytes,
    });
  }

  /**
   * Makes again the files made ahead that the snapshots since the last call took (with
   * `spareFiles`): the owner calls it while it waits on something that takes a while — the
   * engine, as an iteration's validation starts (its agent, when no validation command follows).
   */
  makeAhead(): void {
    this.ahead?.refill();
  }

  /**
   * The diff-tree processes this store keeps are ended, and what it made ahead is removed once
   * nothing more is being made (a worker shutting down, tests).
   */
  async close(): Promise<void> {
    this.diffTreeProcesses.closeAll();
    await this.ahead?.close();
  }

  /** The parent of a snapshot this store wrote (null: a root, or a commit git wrote). */
  async parentOf(sessionId: string, commit: string): Promise<string | null> {
    return (await this.commitOf(sessionId, commit))?.parent ?? null;
  }

  /**
   * A snapshot's parent (null for a root) and message (`looprun <runId> <label>`, as `take`
   * writes it), or null when it is not a commit stored as a loose object.
   */
  async commitOf(
    sessionId: string,
    commit: string,
  ): Promise<{ parent: string | null; message: string } | null> {
    const header = await readCommitHeader(this.gitDir(sessionId), commit);
    return header === null ? null : { parent: header.parent, message: header.message };
  }

  /** The tree of a snapshot: remembered when this process wrote it, else read from its object. */
  async treeOf(sessionId: string, commit: string): Promise<string | null> {
    const known = this.commitTrees.get(commit);
    if (known !== undefined) return known;
    return (await readCommitHeader(this.gitDir(sessionId), commit))?.tree ?? null;
  }

  /**
   * Deletes the refs that keep the snapshots of `runIds` (runs of the session that retention
   * deleted): `refs/looprun/<runId>` and a rollback's `refs/looprun/rollback/<runId>`. Their
   * objects stay in the shared store (see snapshot-repository.ts). A session without a
   * repository here has nothing to delete.
   */
  async forgetRuns(sessionId: string, runIds: readonly string[]): Promise<void> {
    const gitDir = this.gitDir(sessionId);
    const bad = runIds.find((id) => !RUN_ID.test(id));
    if (bad !== undefined) throw new Error(`not a run id: ${JSON.stringify(bad)}`);
    if (runIds.length === 0 || !existsSync(join(gitDir, "HEAD"))) return;
    const stdin = runIds
      .map((id) => `delete refs/looprun/${id}\ndelete refs/looprun/rollback/${id}\n`)
      .join("");
    await this.git(gitDir, null, ["update-ref", "--stdin"], undefined, undefined, stdin);
  }

  private objectsOf(gitDir: string): ObjectStore {
    let store = this.objectStores.get(gitDir);
    if (store === undefined) {
      // A bound on what a long-lived worker remembers (sessions come and go): forgetting only
      // costs a look at the disk.
      if (this.objectStores.size >= 256) this.objectStores.clear();
      const spares = this.ahead?.filesFor(gitDir);
      store = { known: new Set(), ...(spares ? { spares } : {}) };
      this.objectStores.set(gitDir, store);
    } else if (store.known.size > 50_000) {
      store.known = new Set();
    }
    return store;
  }

  private base(gitDir: string, workTree: string | null, args: string[]): string[] {
    // safe.directory: the workspace may belong to another user (a mounted volume).
    return [
      "-c",
      "safe.directory=*",
      "-c",
      "core.quotePath=false",
      `--git-dir=${gitDir}`,
      ...(workTree ? [`--work-tree=${workTree}`] : []),
      ...args,
    ];
  }

  /** The index file git uses for `workspace` in the session's git dir (see workspace-index.ts). */
  indexFile(sessionId: string, workspace: string): string {
    return workspaceIndexFile(this.gitDir(sessionId), workspace);
  }

  /** git's result, which must be a success. */
  private async git(
    gitDir: string,
    workTree: string | null,
    args: string[],
    signal?: AbortSignal,
    maxStdoutBytes?: number,
    stdin?: string,
  ): Promise<GitResult> {
    const result = await this.gitRun(gitDir, workTree, args, { signal, maxStdoutBytes, stdin });
    if (result.exitCode !== 0) throw new GitError(args, result);
    return result;
  }

  /**
   * Runs git; with a work tree, on that workspace's own index (see workspace-index.ts), whose
   * lock a killed git leaves is released.
   */
  private async gitRun(
    gitDir: string,
    workTree: string | null,
    args: string[],
    opts: { cwd?: string; signal?: AbortSignal; maxStdoutBytes?: number; stdin?: string },
  ): Promise<GitResult> {
    const index = workTree === null ? null : workspaceIndexFile(gitDir, workTree);
    if (index !== null) await prepareWorkspaceIndex(gitDir, index, this.timeoutMs, opts.signal);
    const result = await runGit(this.base(gitDir, workTree, args), {
      env: index === null ? this.env : { ...this.env, GIT_INDEX_FILE: index },
      timeoutMs: this.timeoutMs,
      ...(opts.cwd !== undefined ? { cwd: opts.cwd } : {}),
      ...(opts.signal ? { signal: opts.signal } : {}),
      ...(opts.maxStdoutBytes !== undefined ? { maxStdoutBytes: opts.maxStdoutBytes } : {}),
      ...(opts.stdin !== undefined ? { stdin: opts.stdin } : {}),
    });
    if (result.exitCode === null && index !== null) await releaseKilledLock(index);
    return result;
  }

  private ensureRepository(sessionId: string): string {
    const gitDir = this.gitDir(sessionId);
    if (existsSync(join(gitDir, "HEAD"))) {
      // A repository made before snapshots kept bytes as they are (see SNAPSHOT_ATTRIBUTES).
      if (!this.attributed.has(gitDir)) {
        // Written now: what the scans kept of this git dir was read through its old indexes.
        if (ensureSnapshotAttributes(gitDir)) this.forgetScans(gitDir);
        if (this.attributed.size >= 1024) this.attributed.clear();
        this.attributed.add(gitDir);
      }
      return gitDir;
    }
    // A new (or removed and made again) git dir holds none of the objects seen before.
    this.objectStores.delete(gitDir);
    this.forgetScans(gitDir);
    if (!this.ahead?.repositoryAs(gitDir)) initSnapshotRepository(this.root, gitDir);
    return gitDir;
  }

  private forgetScans(gitDir: string): void {
    for (const key of this.scans.keys()) if (key.startsWith(`${gitDir}\0`)) this.scans.delete(key);
  }
}
