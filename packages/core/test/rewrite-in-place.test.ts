import { readFileSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { rewriteInPlace } from "../src/util/rewrite-in-place";
import { removeDir, tempDir } from "./support";

let dir: string;
beforeEach(async () => {
  dir = await tempDir("looprun-rewrite-");
});
afterEach(async () => {
  await removeDir(dir);
});

describe("rewriteInPlace", () => {
  it("replaces a file's content, longer or shorter, keeping the file and its mode", () => {
    const path = join(dir, "prompt.md");
    writeFileSync(path, "first version, of some length\n", { mode: 0o600 });
    const inode = statSync(path).ino;

    expect(rewriteInPlace(path, Buffer.from("short\n"))).toBe(true);
    expect(readFileSync(path, "utf8")).toBe("short\n");
    const long = `${"ü".repeat(5000)}\n`;
    expect(rewriteInPlace(path, Buffer.from(long))).toBe(true);
    expect(readFileSync(path, "utf8")).toBe(long);
    expect(rewriteInPlace(path, Buffer.alloc(0))).toBe(true);
    expect(readFileSync(path, "utf8")).toBe("");

    expect(statSync(path).ino).toBe(inode);
    expect(statSync(path).mode & 0o777).toBe(0o600);
  });

  it("leaves a missing file to its caller", () => {
    expect(rewriteInPlace(join(dir, "nothing"), Buffer.from("x"))).toBe(false);
    expect(rewriteInPlace(join(dir, "no-dir", "x"), Buffer.from("x"))).toBe(false);
  });
});
