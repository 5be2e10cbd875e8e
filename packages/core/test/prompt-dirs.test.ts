import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { removeStaleTempDirs } from "@looprun/core";
import { afterEach, beforeEach, expect, it } from "vitest";
import { removeDir, tempDir } from "./support";

let dir: string;
beforeEach(async () => {
  dir = await tempDir("looprun-tmp-");
});
afterEach(async () => {
  await removeDir(dir);
});

it("removes the prompt and review directories of workers that are gone, and only those", async () => {
  // A process that has exited: its pid names nothing alive any more.
  const dead = spawnSync("sh", ["-c", "echo $$"], { encoding: "utf8" }).stdout.trim();
  const stale = join(dir, `looprun-prompt-${dead}-abc123`);
  const staleReview = join(dir, `looprun-review-${dead}-ghi789`);
  const live = join(dir, `looprun-prompt-${process.pid}-def456`);
  const liveReview = join(dir, `looprun-review-${process.pid}-jkl012`);
  const other = join(dir, "looprun-promptless-1-x");
  for (const d of [stale, staleReview, live, liveReview, other]) {
    mkdirSync(d);
    writeFileSync(join(d, "PROMPT.md"), "task\n");
  }
  // A crashed worker's review directory holds the FIFO of its reviewer's stderr.
  spawnSync("mkfifo", [join(staleReview, "stderr.fifo")]);
  expect(await removeStaleTempDirs(dir)).toBe(2);
  expect([stale, staleReview, live, liveReview, other].map((d) => existsSync(d))).toEqual([
    false,
    false,
    true,
    true,
    true,
  ]);
});
