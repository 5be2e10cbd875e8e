import { execFileSync } from "node:child_process";
import { mkdirSync, readFileSync, rmSync, utimesSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { restoreWorkspace, WorkspaceSnapshots } from "@looprun/core";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { dropSnapshots, snapshotsIn } from "./support";

// A snapshot holds a workspace's bytes and a restore writes them back, whatever its
// `.gitattributes` says (the snapshot git dirs' own attributes turn every conversion off).

let dir: string;
let ws: string;
let snapshots: WorkspaceSnapshots;
const target = () => ({ sessionId: "s1", runId: "run-1", workspace: ws });
const CRLF = "one\r\ntwo\r\n";
const MIXED = "lf\ncrlf\r\n$Id$\n";

beforeEach(async () => {
  ({ dir, snapshots } = await snapshotsIn("looprun-attributes-"));
  ws = join(dir, "ws");
  mkdirSync(ws);
  writeFileSync(join(ws, ".gitattributes"), "* text=auto\n*.txt eol=lf ident\n");
  writeFileSync(join(ws, "windows.txt"), CRLF);
  writeFileSync(join(ws, "mixed.md"), MIXED);
});
afterEach(() => dropSnapshots({ dir, snapshots }));

describe("snapshots and .gitattributes", () => {
  it("restores CRLF files byte for byte under `* text=auto`", async () => {
    const baseline = await snapshots.take(target(), "baseline", null);
    writeFileSync(join(ws, "windows.txt"), "rewritten\n");
    writeFileSync(join(ws, "mixed.md"), "rewritten\n");
    await snapshots.take(target(), "iteration 1 attempt 1", baseline);

    const restored = await restoreWorkspace(snapshots, target(), baseline);
    expect(restored.files.map((f) => f.path).sort()).toEqual(["mixed.md", "windows.txt"]);
    expect(readFileSync(join(ws, "windows.txt"), "utf8")).toBe(CRLF);
    expect(readFileSync(join(ws, "mixed.md"), "utf8")).toBe(MIXED);
  });

  it("hashes files again in a git dir whose old index holds them converted", async () => {
    await snapshots.take(target(), "baseline", null, undefined, undefined, { index: true });
    // A git dir as looprun left it before: no attributes of its own, one `index` for the
    // session, written by an `add -A` that converted CRLF to LF under the workspace's rules.
    const gitDir = snapshots.gitDir("s1");
    rmSync(join(gitDir, "info"), { recursive: true });
    rmSync(join(gitDir, "indexes"), { recursive: true, force: true });
    const git = (...args: string[]) =>
      execFileSync("git", [`--git-dir=${gitDir}`, `--work-tree=${ws}`, ...args], {
        env: { PATH: process.env.PATH, GIT_INDEX_FILE: join(gitDir, "index") },
      });
    // Written well before the index (else git's "racy" rule hashes it again anyway).
    const hourAgo = new Date(Date.now() - 3_600_000);
    for (const f of ["windows.txt", "mixed.md", ".gitattributes"])
      utimesSync(join(ws, f), hourAgo, hourAgo);
    git("add", "-A");
    const oldBlob = git("ls-files", "-s", "windows.txt").toString().split(/\s+/)[1];
    expect(git("cat-file", "-p", oldBlob!).toString()).toBe("one\ntwo\n");

    // The next snapshot, windows.txt untouched, then a rollback to it.
    const later = new WorkspaceSnapshots({ root: join(dir, "snapshots") });
    const snapshot = await later.take(target(), "iteration 1", null, undefined, "refs/looprun/l", {
      index: true,
    });
    writeFileSync(join(ws, "windows.txt"), "rewritten\n");
    await restoreWorkspace(later, target(), snapshot);
    later.close();
    expect(readFileSync(join(ws, "windows.txt"), "utf8")).toBe(CRLF);
  });

  it("keeps bytes in a snapshot git dir made before it had attributes of its own", async () => {
    await snapshots.take(target(), "baseline", null);
    // As such a git dir is: no `info/attributes`, no index that knows the files.
    rmSync(join(snapshots.gitDir("s1"), "info"), { recursive: true });
    rmSync(join(snapshots.gitDir("s1"), "indexes"), { recursive: true, force: true });
    const later = new WorkspaceSnapshots({ root: join(dir, "snapshots") });
    const baseline = await later.take(target(), "baseline", null, undefined, "refs/looprun/b", {
      index: true,
    });
    writeFileSync(join(ws, "windows.txt"), "rewritten\n");

    await restoreWorkspace(later, target(), baseline);
    later.close();
    expect(readFileSync(join(ws, "windows.txt"), "utf8")).toBe(CRLF);
  });
});
