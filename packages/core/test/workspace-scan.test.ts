import { execFileSync } from "node:child_process";
import {
  chmodSync,
  lstatSync,
  mkdirSync,
  rmSync,
  symlinkSync,
  unlinkSync,
  utimesSync,
  writeFileSync,
} from "node:fs";
import { join } from "node:path";
import { runStep, WorkspaceSnapshots } from "@looprun/core";
import { MemoryRunStore } from "@looprun/core/testing";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { snapshotsOf } from "../src/engine/snapshot-step";
import { readGitIndex, statKey } from "../src/snapshots/index-tree";
import { SNAPSHOT_ATTRIBUTES } from "../src/snapshots/snapshot-repository";
import { filesFromIndex } from "../src/snapshots/workspace-scan";
import { makeRun, removeDir, resources, tempDir } from "./support";

/**
 * The in-process read of a workspace (workspace-scan.ts) must give the tree `git add -A` gives.
 * A reference git dir lives through the same steps with git alone (`add -A`, `write-tree`:
 * git's own index remembers what is tracked), and every snapshot's tree is compared with it.
 */

let dir: string;
let ws: string;
let reference: string;
let snapshots: WorkspaceSnapshots;
const target = () => ({ sessionId: "scan", runId: "run-1", workspace: ws });

const gitEnv = () => ({
  PATH: process.env.PATH ?? "",
  HOME: dir,
  XDG_CONFIG_HOME: dir,
  GIT_CONFIG_NOSYSTEM: "1",
  GIT_CONFIG_GLOBAL: "/dev/null",
});
const refGit = (...args: string[]) =>
  execFileSync("git", [`--git-dir=${reference}`, `--work-tree=${ws}`, ...args], {
    cwd: ws,
    encoding: "utf8",
    env: gitEnv(),
  }).trim();

/** git's tree of the workspace now, from the reference git dir. */
function gitTree(): string {
  refGit("add", "-A");
  return refGit("write-tree");
}

let parent: string | null = null;
/** A snapshot's tree, and how the snapshot read the workspace. */
async function snapshotTree(): Promise<{ tree: string; how: "scan" | "git" }> {
  const before = { ...snapshots.reads };
  parent = await snapshots.take(target(), "step", parent);
  const tree = await snapshots.treeOf("scan", parent);
  const how = snapshots.reads.scans > before.scans ? "scan" : "git";
  expect(snapshots.reads.scans + snapshots.reads.gitAdds).toBe(before.scans + before.gitAdds + 1);
  return { tree: tree ?? "", how };
}

const write = (path: string, content: string | Buffer) => {
  mkdirSync(join(ws, path, ".."), { recursive: true });
  writeFileSync(join(ws, path), content);
};

beforeEach(async () => {
  dir = await tempDir("looprun-scan-");
  ws = join(dir, "ws");
  reference = join(dir, "reference.git");
  mkdirSync(ws);
  execFileSync("git", ["init", "-q", "--bare", reference], { env: gitEnv() });
  // The snapshot git dirs' attributes (no conversion), so that git reads what they store.
  writeFileSync(join(reference, "info", "attributes"), SNAPSHOT_ATTRIBUTES);
  snapshots = new WorkspaceSnapshots({ root: join(dir, "snapshots"), path: process.env.PATH });
  parent = null;
});
afterEach(async () => {
  await removeDir(dir);
});

describe("reading a workspace in-process", () => {
  it("gives git's tree through edits, deletions, modes, links, ignore rules and tracked-but-ignored files", async () => {
    write("a.txt", "aaaa\n");
    write("dir/b.txt", "b\n");
    write("script.sh", "#!/bin/sh\necho hi\n");
    chmodSync(join(ws, "script.sh"), 0o755);
    symlinkSync("a.txt", join(ws, "link"));
    write(".gitignore", "*.log\nbuild/\n/only-root\n");
    write("x.log", "ignored\n");
    write("build/out.txt", "ignored\n");
    write("only-root", "ignored at the root only\n");
    write("sub/only-root", "kept below the root\n");
    write("héllo wörld.txt", "unicode name\n");
    mkdirSync(join(ws, "empty"));
    write("sub/.gitignore", "!keep.log\n*.tmp\n");
    write("sub/keep.log", "re-included by the deeper .gitignore\n");
    write("sub/x.tmp", "ignored\n");
    write("sub/deeper/y.tmp", "ignored\n");
    write("sub/deeper/z.txt", "kept\n");
    write("a-b", "sorts before a/ in the index\n");
    write("a/inner", "a directory named a\n");
    mkdirSync(join(ws, ".git"));
    write(".git/HEAD", "the workspace's own repository is never read\n");

    // The first snapshot in this process: git, which tells the scan what it found.
    expect(await snapshotTree()).toEqual({ tree: gitTree(), how: "git" });

    // Same size, same moment: only the racy-git rule sees the change.
    write("a.txt", "AAAA\n");
    write("dir/c.txt", "c\n");
    unlinkSync(join(ws, "dir/b.txt"));
    chmodSync(join(ws, "script.sh"), 0o644);
    unlinkSync(join(ws, "link"));
    symlinkSync("dir/c.txt", join(ws, "link"));
    write("new.txt", "new\n");
    expect(await snapshotTree()).toEqual({ tree: gitTree(), how: "scan" });

    // Again the same size, just after the scan read it.
    write("a.txt", "aAaA\n");
    // Ignored from now on, but tracked: git keeps updating them; new files there stay out.
    write(".gitignore", "*.log\nbuild/\n/only-root\na.txt\ndir/\n");
    write("dir/c.txt", "c changed\n");
    write("dir/d.txt", "untracked and ignored\n");
    chmodSync(join(ws, "script.sh"), 0o700);
    expect(await snapshotTree()).toEqual({ tree: gitTree(), how: "scan" });

    // A file becomes a directory and a directory a file; a tracked file under an ignored
    // directory is deleted.
    unlinkSync(join(ws, "new.txt"));
    write("new.txt/inner.txt", "now a directory\n");
    rmSync(join(ws, "sub/deeper"), { recursive: true });
    write("sub/deeper", "now a file\n");
    unlinkSync(join(ws, "dir/c.txt"));
    expect(await snapshotTree()).toEqual({ tree: gitTree(), how: "scan" });

    // Nothing changed.
    expect(await snapshotTree()).toEqual({ tree: gitTree(), how: "scan" });

    // A workspace's attributes convert nothing in a snapshot git dir (SNAPSHOT_ATTRIBUTES):
    // the scan reads the bytes as git does, and keeps reading the workspace itself.
    write(".gitattributes", "*.txt text eol=crlf\n* text=auto\n");
    write("crlf.txt", "one\r\ntwo\r\n");
    expect(await snapshotTree()).toEqual({ tree: gitTree(), how: "scan" });
    unlinkSync(join(ws, ".gitattributes"));
    unlinkSync(join(ws, "crlf.txt"));
    expect(await snapshotTree()).toEqual({ tree: gitTree(), how: "scan" });

    // A nested repository is git's (a gitlink or an embedded repository).
    const nested = join(ws, "nested");
    execFileSync("git", ["init", "-q", nested], { env: gitEnv() });
    write("nested/file.txt", "in a nested repository\n");
    execFileSync(
      "git",
      ["-c", "user.name=U", "-c", "user.email=u@x", "commit", "-qm", "one", "--allow-empty"],
      {
        cwd: nested,
        env: gitEnv(),
      },
    );
    expect(await snapshotTree()).toEqual({ tree: gitTree(), how: "git" });
  });

  it("does not read a tracked file through a directory turned into a symbolic link", async () => {
    const outside = join(dir, "outside");
    mkdirSync(outside);
    writeFileSync(join(outside, "hostname"), "a file outside the workspace\n");
    write("conf/hostname", "mine\n");
    write("d/z", "z\n");
    write("e/z", "e's z\n");
    expect(await snapshotTree()).toEqual({ tree: gitTree(), how: "git" });
    write("a.txt", "the scan reads the workspace from now on\n");
    expect(await snapshotTree()).toEqual({ tree: gitTree(), how: "scan" });

    // A directory swapped for a link out of the workspace, and one for a link inside it.
    rmSync(join(ws, "conf"), { recursive: true });
    symlinkSync(outside, join(ws, "conf"));
    rmSync(join(ws, "d"), { recursive: true });
    symlinkSync("e", join(ws, "d"));
    const { tree, how } = await snapshotTree();
    expect({ tree, how }).toEqual({ tree: gitTree(), how: "scan" });
    // The links are links; nothing beyond them is in the snapshot (git's own `fsck` agrees).
    const listing = execFileSync(
      "git",
      [`--git-dir=${join(dir, "snapshots", "scan.git")}`, "ls-tree", "-r", tree],
      { encoding: "utf8", env: gitEnv() },
    );
    expect(listing).toMatch(/^120000 blob \w+\tconf$/m);
    expect(listing).toMatch(/^120000 blob \w+\td$/m);
    expect(listing).not.toContain("conf/");
    expect(listing).not.toContain("d/z");
    expect(listing).toContain("e/z");
  });

  it("leaves the workspace's index knowing files tracked since and ignored now, for another process's git", async () => {
    write("a.txt", "a\n");
    expect(await snapshotTree()).toEqual({ tree: gitTree(), how: "git" });
    write("t.tmp", "1\n");
    write("logs/old.txt", "1\n");
    expect(await snapshotTree()).toEqual({ tree: gitTree(), how: "scan" });
    // Tracked, then ignored: git keeps updating them, and so do the scans.
    write(".gitignore", "*.tmp\nlogs/\n");
    write("t.tmp", "2\n");
    write("logs/old.txt", "2\n");
    expect(await snapshotTree()).toEqual({ tree: gitTree(), how: "scan" });
    // Another process — the API's rollback taking its `before`, a worker started again — has
    // no scan to go on: git's `add -A`, from the index on disk, must still know them.
    write("t.tmp", "3\n");
    write("logs/old.txt", "3\n");
    snapshots = new WorkspaceSnapshots({ root: join(dir, "snapshots"), path: process.env.PATH });
    const { tree, how } = await snapshotTree();
    expect({ tree, how }).toEqual({ tree: gitTree(), how: "git" });
    const listing = execFileSync(
      "git",
      [`--git-dir=${join(dir, "snapshots", "scan.git")}`, "ls-tree", "-r", "--name-only", tree],
      { encoding: "utf8", env: gitEnv() },
    );
    expect(listing.split("\n")).toEqual(expect.arrayContaining(["t.tmp", "logs/old.txt"]));
  });

  it("leaves a workspace over its limits to git", async () => {
    snapshots = new WorkspaceSnapshots({
      root: join(dir, "snapshots"),
      path: process.env.PATH,
      scanLimits: { maxFiles: 3, maxFileBytes: 1000 },
    });
    write("one.txt", "1\n");
    write("two.txt", "2\n");
    expect(await snapshotTree()).toEqual({ tree: gitTree(), how: "git" });
    write("big.bin", Buffer.alloc(2000, 7));
    expect(await snapshotTree()).toEqual({ tree: gitTree(), how: "git" });
    unlinkSync(join(ws, "big.bin"));
    expect(await snapshotTree()).toEqual({ tree: gitTree(), how: "scan" });
    write("three.txt", "3\n");
    expect(await snapshotTree()).toEqual({ tree: gitTree(), how: "scan" });
    write("four.txt", "4\n");
    expect(await snapshotTree()).toEqual({ tree: gitTree(), how: "git" });
    // Still too many: git's index is not taken as a starting point either.
    expect(await snapshotTree()).toEqual({ tree: gitTree(), how: "git" });
  });

  it("knows an unchanged file by the stat data git's index holds for it", async () => {
    write("old.txt", "written long ago\n");
    write("fresh.txt", "just written\n");
    const past = new Date(Date.now() - 60_000);
    utimesSync(join(ws, "old.txt"), past, past);
    await snapshots.take(target(), "baseline", null);
    const index = await readGitIndex(snapshots.indexFile("scan", ws));
    const files = filesFromIndex(index!)!;
    for (const path of ["old.txt", "fresh.txt"]) {
      const st = lstatSync(join(ws, path), { bigint: true });
      expect(files.get(path)?.stat).toBe(statKey(st.ino, st.size, st.mtimeNs, st.ctimeNs));
    }
    // A file modified just before git hashed it is read again next time; an old one is not.
    expect(files.get("old.txt")?.trusted).toBe(true);
    expect(files.get("fresh.txt")?.trusted).toBe(false);
  });

  /** A run whose agent adds a line per iteration until there are `lines`, run to its end. */
  async function runUntilLines(lines: number) {
    const store = new MemoryRunStore();
    const run = makeRun(
      {
        agent: { type: "command", command: "echo line >> lines.txt" },
        testCommand: `[ "$(wc -l < lines.txt)" -ge ${lines} ]`,
        cooldownMs: 0,
      },
      ws,
    );
    store.add(run);
    const res = resources(store);
    expect(await runStep(res, run.id)).toMatchObject({ status: "succeeded" });
    return { store, run, runSnapshots: snapshotsOf(res) };
  }

  it("reads the workspace in-process after every iteration but the baseline's", async () => {
    write("README.md", "a workspace with files: its baseline is git's\n");
    const { store, run, runSnapshots } = await runUntilLines(3);
    expect(runSnapshots.reads).toEqual({ scans: 3, gitAdds: 1 });
    const [s1, s2, s3] = store.snapshotsOf(run.id);
    for (const s of [s1, s2, s3]) expect(s?.diff).toMatch(/^\+line$/m);
    expect(store.changes.get(run.id)?.patch).toContain("+line\n+line\n+line\n");
  });

  it("takes the baseline of an empty workspace without git", async () => {
    const { store, run, runSnapshots } = await runUntilLines(2);
    expect(runSnapshots.reads).toEqual({ scans: 3, gitAdds: 0 });
    const baseline = (await store.getRun(run.id))?.baselineSnapshot ?? "";
    // git's empty tree.
    expect(await runSnapshots.treeOf(run.sessionId, baseline)).toBe(
      "4b825dc642cb6eb9a060e54bf8d69288fbee4904",
    );
    expect(store.changes.get(run.id)?.patch).toContain("+line\n+line\n");
    expect(store.changes.get(run.id)?.files).toEqual(["lines.txt"]);
  });
});
