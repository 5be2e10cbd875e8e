import { execFileSync, spawnSync } from "node:child_process";
import { lstatSync, mkdirSync, readlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { WorkspaceSnapshots } from "@looprun/core";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { dropSnapshots, snapshotsIn } from "./support";

// The sessions' snapshot repositories are made without git and share one object store
// (snapshot-repository.ts): git must read each as its own, and must not let one of them drop
// what the others hold.

let dir: string;
let root: string;
let snapshots: WorkspaceSnapshots;
const env = () => ({ PATH: process.env.PATH, HOME: dir, GIT_CONFIG_NOSYSTEM: "1" });
const git = (session: string, ...args: string[]) =>
  execFileSync("git", [`--git-dir=${snapshots.gitDir(session)}`, ...args], {
    encoding: "utf8",
    env: env(),
  });

/** A workspace for `session` holding `files`, snapshotted once; returns its snapshot id. */
async function snapshotOf(session: string, files: Record<string, string>): Promise<string> {
  const ws = join(dir, `ws-${session}`);
  mkdirSync(ws, { recursive: true });
  for (const [name, content] of Object.entries(files)) writeFileSync(join(ws, name), content);
  return snapshots.take(
    { sessionId: session, runId: `01RUN${session}`, workspace: ws },
    "baseline",
    null,
  );
}

beforeEach(async () => {
  ({ dir, snapshots } = await snapshotsIn("looprun-snaprepo-"));
  root = join(dir, "snapshots");
});
afterEach(() => dropSnapshots({ dir, snapshots }));

describe("a session's snapshot repository", () => {
  it("is a bare repository git reads, whose objects are the store every session shares", async () => {
    const one = await snapshotOf("s1", { "same.txt": "held by both sessions\n", "a.txt": "one\n" });
    const two = await snapshotOf("s2", { "same.txt": "held by both sessions\n" });

    for (const session of ["s1", "s2"]) {
      const objects = join(snapshots.gitDir(session), "objects");
      expect(lstatSync(objects).isSymbolicLink()).toBe(true);
      expect(readlinkSync(objects)).toBe("../objects");
      expect(git(session, "rev-parse", "--is-bare-repository").trim()).toBe("true");
      expect(git(session, "config", "--get", "gc.auto").trim()).toBe("0");
      expect(() => git(session, "fsck", "--strict", "--no-dangling")).not.toThrow();
    }
    expect(git("s1", "show", `${one}:a.txt`)).toBe("one\n");
    // One blob for the file both hold, in the shared store.
    const blob = git("s1", "rev-parse", `${one}:same.txt`).trim();
    expect(git("s2", "rev-parse", `${two}:same.txt`).trim()).toBe(blob);
    expect(lstatSync(join(root, "objects", blob.slice(0, 2), blob.slice(2))).isFile()).toBe(true);
  });

  it("refuses to prune: what it does not reach is another session's", async () => {
    await snapshotOf("s1", { "a.txt": "one\n" });
    const two = await snapshotOf("s2", { "b.txt": "two\n" });
    const inS1 = (...args: string[]) =>
      spawnSync("git", [`--git-dir=${snapshots.gitDir("s1")}`, ...args], {
        encoding: "utf8",
        env: env(),
      });
    const prune = inS1("prune", "--expire=now");
    expect(prune.status).not.toBe(0);
    expect(prune.stderr).toContain("precious-objects");
    // gc runs, but neither prunes nor drops packs.
    inS1("gc", "--prune=now");
    const blob = git("s2", "rev-parse", `${two}:b.txt`).trim();
    expect(lstatSync(join(root, "objects", blob.slice(0, 2), blob.slice(2))).isFile()).toBe(true);
    expect(git("s2", "show", `${two}:b.txt`)).toBe("two\n");
  });

  it("keeps the objects of a repository git made before (its own directory)", async () => {
    mkdirSync(root, { recursive: true });
    execFileSync("git", ["init", "--quiet", "--bare", snapshots.gitDir("old")], { env: env() });
    const id = await snapshotOf("old", { "a.txt": "old\n" });
    expect(lstatSync(join(snapshots.gitDir("old"), "objects")).isDirectory()).toBe(true);
    expect(git("old", "show", `${id}:a.txt`)).toBe("old\n");
    const blob = git("old", "rev-parse", `${id}:a.txt`).trim();
    expect(
      lstatSync(join(snapshots.gitDir("old"), "objects", blob.slice(0, 2), blob.slice(2))).isFile(),
    ).toBe(true);
  });
});
