import { execFileSync } from "node:child_process";
import { chmodSync, mkdirSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { WorkspaceSnapshots } from "@looprun/core";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
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
    env: { PATH: process.env.PATH, HOME: dir, GIT_CONFIG_NOSYSTEM: "1" },
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

    const change = await snapshots.change("s1", base, head, 8 * 1024 * 1024);
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

    const change = await snapshots.change("s1", base, head, 1000);
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
    expect(await snapshots.change("s1", base, head, 1000)).toEqual({
      files: [],
      stat: "",
      patch: { text: "", bytes: 0, truncated: false },
    });
  });
});
