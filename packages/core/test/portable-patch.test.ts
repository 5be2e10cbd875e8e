import { execFileSync } from "node:child_process";
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { runStep } from "@looprun/core";
import { MemoryRunStore } from "@looprun/core/testing";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { makeRun, removeDir, resources, tempDir } from "./support";

// Patches are kept as text (the run's patch, each iteration's diff). A file named or written in
// another encoding than UTF-8 must come back from `git apply` as the same bytes, not as a
// name or a line with U+FFFD in it.

/** Every file under `dir`: its name's bytes (hex) → its contents' bytes (hex). */
function bytesTree(dir: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const name of readdirSync(dir, { encoding: "buffer" })) {
    out[name.toString("hex")] = readFileSync(
      Buffer.concat([Buffer.from(`${dir}/`), name]),
    ).toString("hex");
  }
  return out;
}

let dir: string;
let ws: string;
let store: MemoryRunStore;
beforeEach(async () => {
  dir = await tempDir("looprun-portable-");
  ws = join(dir, "ws");
  mkdirSync(ws);
  writeFileSync(join(ws, "keep.txt"), "k\n");
  store = new MemoryRunStore();
});
afterEach(async () => {
  await removeDir(dir);
});

/** `patch` applied with git to a copy of `from`'s files. */
function applied(from: Record<string, Buffer>, patch: string): Record<string, string> {
  const copy = join(dir, `copy-${Math.random().toString(36).slice(2)}`);
  mkdirSync(copy);
  for (const [name, data] of Object.entries(from)) writeFileSync(join(copy, name), data);
  writeFileSync(join(dir, "p.patch"), patch);
  execFileSync("git", ["apply", join(dir, "p.patch")], { cwd: copy, stdio: "pipe" });
  return bytesTree(copy);
}

describe("patches of files that are not UTF-8", () => {
  it("keep a name in another encoding (quoted as git quotes it), in the run's patch and in an iteration's diff", async () => {
    // Iteration 2 (whose diff git diff-tree reads with the run's) names a file in Latin-1.
    const run = makeRun(
      {
        agent: {
          type: "command",
          command: [
            'if [ "$LOOPRUN_ITERATION" = 1 ]; then echo one > one.txt; exit 0; fi',
            "echo latin > \"$(printf 'caf\\351.txt')\"; echo utf > é.txt; touch done",
          ].join("\n"),
        },
        testCommand: "test -f done",
        maxIterations: 2,
        cooldownMs: 0,
      },
      ws,
    );
    store.add(run);
    expect(await runStep(resources(store), run.id)).toMatchObject({ status: "succeeded" });
    const final = bytesTree(ws);
    expect(Object.keys(final)).toContain(Buffer.from("caf\xe9.txt", "latin1").toString("hex"));

    const [change] = [...store.changes.values()];
    expect(change?.patch).toContain('"a/caf\\351.txt"');
    // Only the names are quoted: the contents stay readable.
    expect(change?.patch).not.toContain("GIT binary patch");
    expect(change?.patch).toContain("+latin");
    expect(applied({ "keep.txt": Buffer.from("k\n") }, change!.patch!)).toEqual(final);

    const second = store.snapshotsOf(run.id)[1]!;
    expect(second.diff).toContain('"b/caf\\351.txt"');
    const afterFirst = { "keep.txt": Buffer.from("k\n"), "one.txt": Buffer.from("one\n") };
    expect(applied(afterFirst, second.diff)).toEqual(final);
  });

  it("keep contents in another encoding, as a binary patch", async () => {
    const run = makeRun(
      {
        agent: {
          type: "command",
          command: "printf 'caf\\351\\n' > keep.txt; echo plain > new.txt",
        },
        testCommand: "true",
        maxIterations: 1,
        cooldownMs: 0,
      },
      ws,
    );
    store.add(run);
    expect(await runStep(resources(store), run.id)).toMatchObject({ status: "succeeded" });
    const [change] = [...store.changes.values()];
    expect(change?.patch).toContain("GIT binary patch");
    expect(change?.patch).not.toContain("\ufffd");
    const final = bytesTree(ws);
    expect(final[Buffer.from("keep.txt").toString("hex")]).toBe(
      Buffer.from("caf\xe9\n", "latin1").toString("hex"),
    );
    expect(applied({ "keep.txt": Buffer.from("k\n") }, change!.patch!)).toEqual(final);
    expect(store.snapshotsOf(run.id)[0]?.diff).toBe(change?.patch);
  });
});
