import { existsSync, readFileSync } from "node:fs";
import { mkdir, realpath, rename, symlink, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { openConfined } from "../../src/tools/confined-open";
import { PathConfinementError } from "../../src/tools/errors";
import { removeDir, tempDir } from "./helpers";

// confinePath checks a path, then the tool opens it: a command of the run may swap a directory
// of the path for a symlink out in between. These tests make the swap happen right there, the
// path already checked, as a command racing the tool in a loop would.

let base: string;
let root: string;
let outside: string;
beforeEach(async () => {
  base = await realpath(await tempDir());
  root = join(base, "ws");
  outside = join(base, "outside");
  await mkdir(join(root, "sub"), { recursive: true });
  await mkdir(outside);
  await writeFile(join(root, "sub", "secret.txt"), "inside\n");
  await writeFile(join(outside, "secret.txt"), "TOP SECRET outside\n");
});
afterEach(async () => {
  await removeDir(base);
});

/** `sub` becomes a link out, as `mv sub subd; ln -s OUTSIDE sub` would make it. */
async function swapSub(): Promise<void> {
  await rename(join(root, "sub"), join(root, "subd"));
  await symlink(outside, join(root, "sub"));
}

describe("openConfined", () => {
  it("opens a file inside the workspace, for reading and for writing", async () => {
    const file = await openConfined(
      root,
      join(root, "sub", "secret.txt"),
      "sub/secret.txt",
      "read",
    );
    expect((await file.readFile()).toString()).toBe("inside\n");
    await file.close();
    const created = await openConfined(root, join(root, "sub", "new.txt"), "sub/new.txt", "create");
    await created.writeFile("new\n");
    await created.close();
    expect(readFileSync(join(root, "sub", "new.txt"), "utf8")).toBe("new\n");
  });

  it("refuses a read when a directory of the path became a symlink out", async () => {
    const absolute = join(root, "sub", "secret.txt");
    await swapSub();
    const opening = openConfined(root, absolute, "sub/secret.txt", "read");
    await expect(opening).rejects.toBeInstanceOf(PathConfinementError);
    await expect(opening).rejects.toThrow(/outside the workspace/);
  });

  it("refuses a write there without truncating the file the link leads to", async () => {
    const absolute = join(root, "sub", "secret.txt");
    await swapSub();
    await expect(openConfined(root, absolute, "sub/secret.txt", "write")).rejects.toThrow(
      /outside the workspace/,
    );
    await expect(openConfined(root, absolute, "sub/secret.txt", "create")).rejects.toThrow(
      /outside the workspace/,
    );
    expect(readFileSync(join(outside, "secret.txt"), "utf8")).toBe("TOP SECRET outside\n");
  });

  it("removes a file it created out there before refusing", async () => {
    const absolute = join(root, "sub", "planted.txt");
    await swapSub();
    await expect(openConfined(root, absolute, "sub/planted.txt", "create")).rejects.toThrow(
      /outside the workspace/,
    );
    expect(existsSync(join(outside, "planted.txt"))).toBe(false);
  });

  it("does not follow a last component that became a symlink", async () => {
    const absolute = join(root, "sub", "secret.txt");
    await rename(absolute, join(root, "sub", "moved.txt"));
    await symlink(join(outside, "secret.txt"), absolute);
    await expect(openConfined(root, absolute, "sub/secret.txt", "read")).rejects.toMatchObject({
      code: "ELOOP",
    });
    await expect(openConfined(root, absolute, "sub/secret.txt", "write")).rejects.toMatchObject({
      code: "ELOOP",
    });
    expect(readFileSync(join(outside, "secret.txt"), "utf8")).toBe("TOP SECRET outside\n");
  });
});
