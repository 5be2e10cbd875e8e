import { execFileSync, spawnSync } from "node:child_process";
import {
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  realpathSync,
  rmSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { join } from "node:path";
import { WorkspaceSnapshots } from "@looprun/core";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { removeDir, tempDir } from "./support";

// A worker's snapshot store keeps files (and the object directories) made ahead for the next
// objects (spare-files.ts): what it writes through them must be what git reads, and nothing of
// them may outlive the store — nor a killed process's.

let dir: string;
let ws: string;
let root: string;
let snapshots: WorkspaceSnapshots;
const target = () => ({ sessionId: "s1", runId: "01RUN", workspace: ws });
const objects = () => join(root, "objects");
const spares = () => readdirSync(objects()).filter((name) => name.startsWith("tmp_spare_"));
const git = (...args: string[]) =>
  execFileSync("git", [`--git-dir=${snapshots.gitDir("s1")}`, ...args], {
    encoding: "utf8",
    env: { PATH: process.env.PATH, HOME: dir, GIT_CONFIG_NOSYSTEM: "1" },
  });

/**
 * Waits (in small steps, up to 10 s) until `done` holds — a step at least: a file is in the
 * directory before the callback of the `open` that made it has run.
 */
async function until(done: () => boolean): Promise<void> {
  const end = Date.now() + 10_000;
  do {
    if (Date.now() > end) throw new Error("timed out");
    await new Promise((resolve) => setTimeout(resolve, 10));
  } while (!done());
}

/** The baseline of a.txt holding `text`, with the store's spare files made and ready. */
async function baselineWithSpares(text: string): Promise<string> {
  writeFileSync(join(ws, "a.txt"), text);
  const id = await snapshots.take(target(), "baseline", null);
  snapshots.makeAhead();
  await until(() => spares().length === 3);
  return id;
}

/** A pid no process has now: a child's, once it has exited and been reaped. */
const deadPid = () => spawnSync("true").pid;

beforeEach(async () => {
  dir = await tempDir("looprun-spares-");
  ws = join(dir, "ws");
  root = join(dir, "snapshots");
  mkdirSync(ws);
  snapshots = new WorkspaceSnapshots({ root, spareFiles: 3 });
});
afterEach(async () => {
  await snapshots.close();
  await removeDir(dir);
});

describe("a snapshot store's spare files", () => {
  it("become the objects git reads, read-only as git makes them, and are made again", async () => {
    writeFileSync(join(ws, "a.txt"), "zero\n");
    let parent = await snapshots.take(target(), "baseline", null);
    // Made as the store is first written to (the baseline takes some of them), then again when
    // the owner asks (the engine: as a command starts): `count` of them.
    await until(() => spares().length > 0);
    snapshots.makeAhead();
    await until(() => spares().length === 3);
    const made = new Set(spares());
    const ids: string[] = [parent];
    for (const text of ["one", "two", "three"]) {
      writeFileSync(join(ws, "a.txt"), `${text}\n`);
      parent = await snapshots.take(target(), text, parent);
      ids.push(parent);
      snapshots.makeAhead();
      await until(() => spares().length === 3);
    }
    // Each snapshot wrote a blob, a tree and a commit through spares: none of the first three
    // is left, and three others wait.
    expect(spares().filter((name) => made.has(name))).toEqual([]);
    expect(spares()).toHaveLength(3);
    expect(spares().every((name) => name.startsWith(`tmp_spare_${process.pid}_`))).toBe(true);

    expect(git("show", `${parent}:a.txt`)).toBe("three\n");
    expect(git("rev-list", "refs/looprun/01RUN").trim().split("\n")).toEqual(ids.reverse());
    const blob = git("rev-parse", `${parent}:a.txt`).trim();
    expect(statSync(join(objects(), blob.slice(0, 2), blob.slice(2))).mode & 0o777).toBe(0o444);
    expect(() => git("fsck", "--strict", "--no-dangling")).not.toThrow();
  });

  it("are made again when the owner asks, not when a snapshot takes them", async () => {
    const parent = await baselineWithSpares("zero\n");
    // A file being made holds the directory the snapshot renames its objects out of: the
    // snapshot's writes do not make the next ones (they would wait for them).
    writeFileSync(join(ws, "a.txt"), "one\n");
    const next = await snapshots.take(target(), "one", parent);
    expect(spares()).toEqual([]);
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(spares()).toEqual([]);
    // Beyond the files ready, a snapshot makes its own.
    writeFileSync(join(ws, "a.txt"), "two\n");
    const last = await snapshots.take(target(), "two", next);
    expect(git("show", `${last}:a.txt`)).toBe("two\n");
    snapshots.makeAhead();
    await until(() => spares().length === 3);
    expect(() => git("fsck", "--strict", "--no-dangling")).not.toThrow();
  });

  it("are removed when the store closes, and none is made after", async () => {
    const base = await baselineWithSpares("one\n");
    await snapshots.close();
    expect(spares()).toEqual([]);
    // A store closed still writes, making each file as it goes.
    writeFileSync(join(ws, "a.txt"), "two\n");
    const next = await snapshots.take(target(), "after", base);
    expect(git("show", `${next}:a.txt`)).toBe("two\n");
    snapshots.makeAhead();
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(spares()).toEqual([]);
  });

  it("of a process that is gone are removed by the next store, those of a live one kept", async () => {
    mkdirSync(objects(), { recursive: true });
    const dead = `tmp_spare_${deadPid()}_0123456789ab`;
    const live = `tmp_spare_${process.ppid}_0123456789ab`;
    for (const name of [dead, live, "tmp_spare_x_1"]) writeFileSync(join(objects(), name), "");
    writeFileSync(join(ws, "a.txt"), "one\n");
    await snapshots.take(target(), "baseline", null);
    const left = readdirSync(objects());
    expect(left).not.toContain(dead);
    expect(left).toContain(live);
    expect(left).toContain("tmp_spare_x_1");
  });

  it("come with the store's 256 object directories, made while nothing waits for them", async () => {
    writeFileSync(join(ws, "a.txt"), "one\n");
    await snapshots.take(target(), "baseline", null);
    const fanOut = () => readdirSync(objects()).filter((name) => /^[0-9a-f]{2}$/.test(name));
    await until(() => fanOut().length === 256);
    expect(fanOut()).toContain("00");
    expect(fanOut()).toContain("ff");
  });

  it("held for a store that was removed and made anew do not fail a snapshot", async () => {
    writeFileSync(join(ws, "a.txt"), "one\n");
    await snapshots.take(target(), "baseline", null);
    snapshots.makeAhead();
    // Nothing is being made when it goes (a removal that meets a mkdir fails).
    await until(() => spares().length === 3 && readdirSync(objects()).length >= 256 + 2 + 3);
    // Everything goes, the spares (held open) with it; the store is made anew on the next take.
    rmSync(root, { recursive: true, force: true });
    writeFileSync(join(ws, "a.txt"), "two\n");
    const id = await snapshots.take(target(), "again", null);
    expect(git("show", `${id}:a.txt`)).toBe("two\n");
    expect(() => git("fsck", "--strict", "--no-dangling")).not.toThrow();
  });
});

describe("a snapshot store's git dir made ahead", () => {
  const spareDirs = () => readdirSync(root).filter((name) => name.startsWith(".spare_"));
  /** One made whole (its HEAD is written last), and a step more for its maker to see it done. */
  const oneReady = async () => {
    await until(() => spareDirs().some((name) => existsSync(join(root, name, "HEAD"))));
    await until(() => true);
  };

  it("becomes the next new session's, a repository git reads as the others, and is made again", async () => {
    writeFileSync(join(ws, "a.txt"), "one\n");
    await snapshots.take(target(), "baseline", null);
    await oneReady();
    const [made] = spareDirs();
    const other = { sessionId: "s2", runId: "02RUN", workspace: ws };
    const id = await snapshots.take(other, "baseline", null);
    expect(readdirSync(root)).not.toContain(made);
    await oneReady();
    expect(spareDirs()).toHaveLength(1);
    expect(spareDirs()[0]).not.toBe(made);

    const git2 = (...args: string[]) =>
      execFileSync("git", [`--git-dir=${snapshots.gitDir("s2")}`, ...args], {
        encoding: "utf8",
        env: { PATH: process.env.PATH, HOME: dir, GIT_CONFIG_NOSYSTEM: "1" },
      });
    expect(git2("show", `${id}:a.txt`)).toBe("one\n");
    expect(git2("rev-parse", "refs/looprun/02RUN").trim()).toBe(id);
    expect(git2("rev-parse", "--is-bare-repository").trim()).toBe("true");
    expect(git2("config", "--get", "gc.auto").trim()).toBe("0");
    expect(git2("config", "--get", "extensions.preciousObjects").trim()).toBe("true");
    // The same files as a git dir made on the spot (s1's, the first new session's): what
    // initSnapshotRepository writes and what the spare's maker writes must not drift apart.
    for (const file of ["HEAD", "config", join("info", "attributes")]) {
      expect(readFileSync(join(snapshots.gitDir("s2"), file), "utf8"), file).toBe(
        readFileSync(join(snapshots.gitDir("s1"), file), "utf8"),
      );
    }
    expect(readlinkSync(join(snapshots.gitDir("s2"), "objects"))).toBe(
      readlinkSync(join(snapshots.gitDir("s1"), "objects")),
    );
    // The object store is the one the sessions share.
    expect(realpathSync(join(snapshots.gitDir("s2"), "objects"))).toBe(realpathSync(objects()));
    expect(() => git2("fsck", "--strict", "--no-dangling")).not.toThrow();
  });

  it("is removed when the store closes; a dead process's is removed by the next store", async () => {
    mkdirSync(join(root, `.spare_${deadPid()}_0123456789ab.git`, "refs"), { recursive: true });
    writeFileSync(join(ws, "a.txt"), "one\n");
    await snapshots.take(target(), "baseline", null);
    await oneReady();
    expect(spareDirs()).toHaveLength(1);
    expect(spareDirs()[0]).toMatch(new RegExp(`^\\.spare_${process.pid}_`));
    await snapshots.close();
    expect(spareDirs()).toEqual([]);
  });
});
