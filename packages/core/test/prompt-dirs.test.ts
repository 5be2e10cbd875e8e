import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { removeStalePromptDirs } from "@looprun/core";
import { afterEach, beforeEach, expect, it } from "vitest";
import { removeDir, tempDir } from "./support";

let dir: string;
beforeEach(async () => {
  dir = await tempDir("looprun-tmp-");
});
afterEach(async () => {
  await removeDir(dir);
});

it("removes the prompt directories of workers that are gone, and only those", async () => {
  // A process that has exited: its pid names nothing alive any more.
  const dead = spawnSync("sh", ["-c", "echo $$"], { encoding: "utf8" }).stdout.trim();
  const stale = join(dir, `looprun-prompt-${dead}-abc123`);
  const live = join(dir, `looprun-prompt-${process.pid}-def456`);
  const other = join(dir, "looprun-promptless-1-x");
  for (const d of [stale, live, other]) {
    mkdirSync(d);
    writeFileSync(join(d, "PROMPT.md"), "task\n");
  }
  expect(await removeStalePromptDirs(dir)).toBe(1);
  expect(existsSync(stale)).toBe(false);
  expect(existsSync(live)).toBe(true);
  expect(existsSync(other)).toBe(true);
});
