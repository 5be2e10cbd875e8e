import { execFileSync } from "node:child_process";
import {
  chmodSync,
  existsSync,
  mkdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { join } from "node:path";
import { WorkspaceSnapshots } from "@looprun/core";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { iterationDiffs } from "../src/snapshots/iteration-diffs";
import { snapshotChange } from "../src/snapshots/snapshot-diffs";
import { removeDir, tempDir } from "./support";

// The snapshot's commit and ref are written without git (git-objects.ts), and the run's change
// comes from one `git diff` (change-output.ts): git itself must read them back as its own.

let dir: string;
let ws: string;
let snapshots: WorkspaceSnapshots;
const target = () => ({ sessionId: "s1", runId: "01RUN", workspace: ws });
const gitDir = () => snapshots.gitDir("s1");
const git = (...args: string[]) =>
  execFileSync("git", ["-c", "core.quotePath=false", `--git-dir=${gitDir()}`, ...args], {
    encoding: "utf8",
    env: {
      PATH: process.env.PATH,
      HOME: dir,
      GIT_CONFIG_NOSYSTEM: "1",
      // The workspace's own index in the snapshot git dir (workspace-index.ts).
      GIT_INDEX_FILE: snapshots.indexFile("s1", ws),
    },
  });

beforeEach(async () => {
  dir = await tempDir("looprun-snapwrites-");
  ws = join(dir, "ws");
  mkdirSync(ws);
  snapshots = new WorkspaceSnapshots({ root: join(dir, "snapshots") });
});
afterEach(async () => {
  await removeDir(dir);
});

describe("snapshot commits written without git", () => {
  it("are commits git reads, verifies and walks, with the ref pointing at the latest", async () => {
    writeFileSync(join(ws, "a.txt"), "one\n");
    const base = await snapshots.take(target(), "baseline", null);
    writeFileSync(join(ws, "a.txt"), "two\n");
    const next = await snapshots.take(target(), "iteration 1 attempt 1", base);

    expect(git("cat-file", "-t", next).trim()).toBe("commit");
    expect(git("rev-parse", `${next}^`).trim()).toBe(base);
    expect(git("rev-parse", "refs/looprun/01RUN").trim()).toBe(next);
    // Rewritten in place from the second snapshot on: exactly the id and a newline, no lock left.
    expect(readFileSync(join(gitDir(), "refs/looprun/01RUN"), "utf8")).toBe(`${next}\n`);
    expect(existsSync(join(gitDir(), "refs/looprun/01RUN.lock"))).toBe(false);
    expect(git("log", "--format=%an <%ae>|%s", "refs/looprun/01RUN").trim().split("\n")).toEqual([
      "looprun <looprun@localhost>|looprun 01RUN iteration 1 attempt 1",
      "looprun <looprun@localhost>|looprun 01RUN baseline",
    ]);
    expect(git("show", `${next}:a.txt`)).toBe("two\n");
    // fsck finds every object sound and reachable from the refs.
    expect(() => git("fsck", "--strict", "--no-dangling")).not.toThrow();
  });

  it("keeps a separate ref for a rollback's snapshot", async () => {
    writeFileSync(join(ws, "a.txt"), "one\n");
    const base = await snapshots.take(target(), "baseline", null);
    const before = await snapshots.take(
      target(),
      "before",
      null,
      undefined,
      "refs/looprun/rollback/01RUN",
    );
    expect(git("rev-parse", "refs/looprun/rollback/01RUN").trim()).toBe(before);
    expect(git("rev-parse", "refs/looprun/01RUN").trim()).toBe(base);
  });
});

describe("snapshot trees written from the index without git", () => {
  it("are the trees git write-tree makes, sorted as git sorts them", async () => {
    // Names around the `/` of a directory in git's order: "a-b" < "a.txt" < "a/" < "a0".
    for (const name of ["a-b", "a.txt", "a0", "Z", "é.txt", "sp ace", "tab\tname"])
      writeFileSync(join(ws, name), `${name}\n`);
    mkdirSync(join(ws, "a", "deep", "er"), { recursive: true });
    writeFileSync(join(ws, "a", "x"), "x\n");
    writeFileSync(join(ws, "a", "deep", "er", "y"), "y\n");
    writeFileSync(join(ws, "a", "deep", "z.sh"), "#!/bin/sh\n");
    chmodSync(join(ws, "a", "deep", "z.sh"), 0o755);
    writeFileSync(join(ws, "empty"), "");
    symlinkSync("a/x", join(ws, "link"));
    // A nested repository is recorded as a gitlink (its commit), not its files.
    mkdirSync(join(ws, "vendor"));
    const nested = (...args: string[]) =>
      execFileSync("git", ["-c", "user.name=u", "-c", "user.email=u@e", ...args], {
        cwd: join(ws, "vendor"),
        env: { PATH: process.env.PATH, HOME: dir, GIT_CONFIG_NOSYSTEM: "1" },
      });
    nested("init", "-q");
    writeFileSync(join(ws, "vendor", "lib.txt"), "lib\n");
    nested("add", "-A");
    nested("commit", "-qm", "lib");

    const id = await snapshots.take(target(), "baseline", null);
    const tree = git("rev-parse", `${id}^{tree}`).trim();
    expect(tree).toBe(git("write-tree").trim());
    expect(git("ls-tree", "-z", "--name-only", tree).split("\0").filter(Boolean)).toEqual([
      "Z",
      "a-b",
      "a.txt",
      "a",
      "a0",
      "empty",
      "link",
      "sp ace",
      "tab\tname",
      "vendor",
      "é.txt",
    ]);
    expect(git("ls-tree", tree, "vendor").split(" ")[0]).toBe("160000");
    expect(git("ls-tree", tree, "link").split(" ")[0]).toBe("120000");
    expect(git("ls-tree", "-r", tree, "a/deep/z.sh").split(" ")[0]).toBe("100755");
    expect(() => git("fsck", "--strict", "--no-dangling")).not.toThrow();

    // The next snapshot: a changed file deep down, a removed directory, a new one.
    writeFileSync(join(ws, "a", "deep", "er", "y"), "y2\n");
    rmSync(join(ws, "a", "x"));
    rmSync(join(ws, "link"));
    mkdirSync(join(ws, "new"));
    writeFileSync(join(ws, "new", "file"), "new\n");
    const next = await snapshots.take(target(), "iteration 1 attempt 1", id);
    expect(git("rev-parse", `${next}^{tree}`).trim()).toBe(git("write-tree").trim());
    expect(() => git("fsck", "--strict", "--no-dangling")).not.toThrow();
  });

  it("leaves an index it does not read (version 4) to git write-tree", async () => {
    writeFileSync(join(ws, "a.txt"), "one\n");
    const base = await snapshots.take(target(), "baseline", null);
    git("update-index", "--index-version", "4");
    writeFileSync(join(ws, "b.txt"), "two\n");
    // Through git (not read in-process): git adds to the index it keeps in version 4.
    const next = await snapshots.take(
      target(),
      "iteration 1 attempt 1",
      base,
      undefined,
      undefined,
      {
        index: true,
      },
    );
    expect(readFileSync(snapshots.indexFile("s1", ws)).readUInt32BE(4)).toBe(4);
    expect(git("show", `${next}:b.txt`)).toBe("two\n");
    expect(git("rev-parse", `${next}^{tree}`).trim()).toBe(git("write-tree").trim());
  });

  it("writes the empty tree of an empty workspace", async () => {
    const id = await snapshots.take(target(), "baseline", null);
    expect(git("rev-parse", `${id}^{tree}`).trim()).toBe(
      "4b825dc642cb6eb9a060e54bf8d69288fbee4904",
    );
    expect(git("cat-file", "-t", "4b825dc642cb6eb9a060e54bf8d69288fbee4904").trim()).toBe("tree");
  });

  it("writes a tree again into a git dir that was removed and made anew", async () => {
    writeFileSync(join(ws, "a.txt"), "one\n");
    await snapshots.take(target(), "baseline", null);
    rmSync(gitDir(), { recursive: true });
    const id = await snapshots.take(target(), "baseline", null);
    expect(git("show", `${id}:a.txt`)).toBe("one\n");
  });
});

describe("the run's change from one git diff", () => {
  it("gives the same files, stat and patch as git prints them one by one", async () => {
    writeFileSync(join(ws, "keep.txt"), "kept\n");
    writeFileSync(join(ws, "move me.txt"), "moved content that is long enough to be a rename\n");
    writeFileSync(join(ws, "edit.txt"), "one\ntwo\n");
    mkdirSync(join(ws, "d"));
    writeFileSync(join(ws, "d", "old.bin"), Buffer.from([0, 1, 2, 255]));
    writeFileSync(join(ws, "tool.sh"), "#!/bin/sh\n");
    const base = await snapshots.take(target(), "baseline", null);

    rmSync(join(ws, "move me.txt"));
    writeFileSync(join(ws, "moved.txt"), "moved content that is long enough to be a rename\n");
    writeFileSync(join(ws, "edit.txt"), "one\nTWO\nthree\n");
    rmSync(join(ws, "d", "old.bin"));
    writeFileSync(join(ws, "d", "new.bin"), Buffer.from([9, 0, 8]));
    writeFileSync(join(ws, "tab\tname ü.txt"), "odd name\n");
    chmodSync(join(ws, "tool.sh"), 0o755);
    symlinkSync("keep.txt", join(ws, "link"));
    const head = await snapshots.take(target(), "iteration 1 attempt 1", base);

    const change = await snapshotChange(snapshots, "s1", base, head, 8 * 1024 * 1024);
    const names = git("diff", "--name-only", "-z", "--no-renames", base, head)
      .split("\0")
      .filter(Boolean);
    expect(change.files).toEqual(names);
    expect(change.files).toContain("move me.txt");
    expect(change.files).toContain("tab\tname ü.txt");
    expect(change.stat).toBe(git("diff", "--stat=200", "--no-color", base, head));
    const patch = git("diff", "--binary", "--no-color", "--no-ext-diff", base, head);
    expect(change.patch).toEqual({
      text: patch,
      bytes: Buffer.byteLength(patch),
      truncated: false,
    });
  });

  it("caps the patch at a line and still counts all of it", async () => {
    const base = await snapshots.take(target(), "baseline", null);
    writeFileSync(join(ws, "big.txt"), `${"0123456789".repeat(10)}\n`.repeat(100));
    const head = await snapshots.take(target(), "iteration 1 attempt 1", base);
    const full = git("diff", "--binary", "--no-color", "--no-ext-diff", base, head);

    const change = await snapshotChange(snapshots, "s1", base, head, 1000);
    expect(change.patch.truncated).toBe(true);
    expect(change.patch.bytes).toBe(Buffer.byteLength(full));
    expect(change.patch.text.endsWith("\n")).toBe(true);
    expect(Buffer.byteLength(change.patch.text)).toBeLessThanOrEqual(1000);
    expect(full.startsWith(change.patch.text)).toBe(true);
    expect(change.files).toEqual(["big.txt"]);
    expect(change.stat).toContain("big.txt | 100 +");
  });

  it("is empty when nothing changed", async () => {
    writeFileSync(join(ws, "a.txt"), "one\n");
    const base = await snapshots.take(target(), "baseline", null);
    const head = await snapshots.take(target(), "iteration 1 attempt 1", base);
    expect(await snapshotChange(snapshots, "s1", base, head, 1000)).toEqual({
      files: [],
      stat: "",
      patch: { text: "", bytes: 0, truncated: false },
    });
  });
});

describe("a session's snapshot git dir", () => {
  it("is a bare repository that never collects garbage", async () => {
    writeFileSync(join(ws, "a.txt"), "one\n");
    await snapshots.take(target(), "baseline", null);
    expect(git("config", "--get", "gc.auto").trim()).toBe("0");
    expect(git("rev-parse", "--is-bare-repository").trim()).toBe("true");
  });
});

describe("an iteration's two diffs from one git diff-tree", () => {
  const patchOf = (from: string, to: string) =>
    git("diff", "--binary", "--no-color", "--no-ext-diff", from, to);

  async function threeSnapshots() {
    writeFileSync(join(ws, "a.txt"), "one\ntwo\n");
    writeFileSync(join(ws, "rename me.txt"), "a file long enough to be found again as a rename\n");
    mkdirSync(join(ws, "d"));
    writeFileSync(join(ws, "d", "x.bin"), Buffer.from([0, 1, 2]));
    const baseline = await snapshots.take(target(), "baseline", null);
    writeFileSync(join(ws, "a.txt"), "one\nTWO\n");
    rmSync(join(ws, "rename me.txt"));
    writeFileSync(join(ws, "renamed.txt"), "a file long enough to be found again as a rename\n");
    const parent = await snapshots.take(target(), "iteration 1 attempt 1", baseline);
    writeFileSync(join(ws, "d", "x.bin"), Buffer.from([3, 0, 4, 5]));
    writeFileSync(join(ws, "tab\tü.txt"), "odd\n");
    const head = await snapshots.take(target(), "iteration 2 attempt 1", parent);
    return { baseline, parent, head };
  }

  it("gives the bytes git diff gives for each pair", async () => {
    const { baseline, parent, head } = await threeSnapshots();
    const got = await iterationDiffs(snapshots, {
      sessionId: "s1",
      baseline,
      parent,
      head,
      diffCapBytes: 256 * 1024,
      patchCapBytes: 8 * 1024 * 1024,
    });
    const own = patchOf(parent, head);
    const whole = patchOf(baseline, head);
    expect(got.diff).toEqual({ text: own, bytes: Buffer.byteLength(own), truncated: false });
    expect(got.change.patch).toEqual({
      text: whole,
      bytes: Buffer.byteLength(whole),
      truncated: false,
    });
    expect(got.change.stat).toBe(git("diff", "--stat=200", "--no-color", baseline, head));
    expect(got.change.files).toEqual(
      git("diff", "--name-only", "-z", "--no-renames", baseline, head).split("\0").filter(Boolean),
    );
  });

  it("caps each diff on its own, and reads trees of snapshots another process took", async () => {
    const { baseline, parent, head } = await threeSnapshots();
    // A fresh instance has not seen these snapshots: it reads their trees from the objects.
    const other = new WorkspaceSnapshots({ root: join(dir, "snapshots") });
    for (const id of [baseline, parent, head])
      expect(await other.treeOf("s1", id)).toBe(git("rev-parse", `${id}^{tree}`).trim());
    const got = await iterationDiffs(other, {
      sessionId: "s1",
      baseline,
      parent,
      head,
      diffCapBytes: 100,
      patchCapBytes: 300,
    });
    const own = patchOf(parent, head);
    const whole = patchOf(baseline, head);
    expect(got.diff.truncated).toBe(true);
    expect(got.diff.bytes).toBe(Buffer.byteLength(own));
    expect(own.startsWith(got.diff.text)).toBe(true);
    expect(got.change.patch.truncated).toBe(true);
    expect(got.change.patch.bytes).toBe(Buffer.byteLength(whole));
    expect(whole.startsWith(got.change.patch.text)).toBe(true);
    expect(Buffer.byteLength(got.change.patch.text)).toBeLessThanOrEqual(300);
  });

  it("is empty for an iteration that changed nothing", async () => {
    writeFileSync(join(ws, "a.txt"), "one\n");
    const baseline = await snapshots.take(target(), "baseline", null);
    writeFileSync(join(ws, "a.txt"), "two\n");
    const parent = await snapshots.take(target(), "iteration 1 attempt 1", baseline);
    const head = await snapshots.take(target(), "iteration 2 attempt 1", parent);
    const got = await iterationDiffs(snapshots, {
      sessionId: "s1",
      baseline,
      parent,
      head,
      diffCapBytes: 1000,
      patchCapBytes: 1000,
    });
    expect(got.diff).toEqual({ text: "", bytes: 0, truncated: false });
    expect(got.change.patch.text).toBe(patchOf(baseline, head));
    expect(got.change.files).toEqual(["a.txt"]);
  });
});
