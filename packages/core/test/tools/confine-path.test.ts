import { mkdir, realpath, symlink, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { confinePath, isWithin, PathConfinementError } from "../../src/tools/index";
import { removeDir, tempDir } from "./helpers";

let base: string;
let root: string;
let outside: string;

beforeEach(async () => {
  base = await realpath(await tempDir());
  root = join(base, "ws");
  outside = join(base, "ws-evil");
  await mkdir(join(root, "src"), { recursive: true });
  await mkdir(outside);
  await writeFile(join(root, "src", "a.ts"), "a");
  await writeFile(join(outside, "secret"), "secret");
});
afterEach(async () => {
  await removeDir(base);
});

async function refusal(input: string): Promise<PathConfinementError> {
  const error = await confinePath(root, input).then(
    () => null,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(PathConfinementError);
  return error as PathConfinementError;
}

describe("confinePath", () => {
  it("resolves relative paths from the root", async () => {
    expect(await confinePath(root, "src/a.ts")).toBe(join(root, "src", "a.ts"));
    expect(await confinePath(root, "./src/../src/a.ts")).toBe(join(root, "src", "a.ts"));
    expect(await confinePath(root, ".")).toBe(root);
    expect(await confinePath(root, "")).toBe(root);
  });

  it("accepts paths that do not exist yet, below the root", async () => {
    expect(await confinePath(root, "new/dir/file.txt")).toBe(join(root, "new", "dir", "file.txt"));
  });

  it("accepts absolute paths inside the root and refuses others", async () => {
    expect(await confinePath(root, join(root, "src", "a.ts"))).toBe(join(root, "src", "a.ts"));
    const error = await refusal("/etc/passwd");
    expect(error.name).toBe("PathConfinementError");
    expect(error.reason).toBe("outside_workspace");
    expect(error.message).toContain("outside the workspace");
  });

  it("refuses ../ escapes", async () => {
    expect((await refusal("../ws-evil/secret")).reason).toBe("outside_workspace");
    expect((await refusal("src/../../secret")).reason).toBe("outside_workspace");
    expect((await refusal("..")).reason).toBe("outside_workspace");
  });

  it("compares whole components: a sibling sharing the root's prefix is outside", async () => {
    expect((await refusal(join(outside, "secret"))).reason).toBe("outside_workspace");
    expect(isWithin("/ws", "/ws-evil")).toBe(false);
    expect(isWithin("/ws", "/ws/x")).toBe(true);
    expect(isWithin("/ws", "/ws")).toBe(true);
    expect(isWithin("/", "/anything")).toBe(true);
  });

  it("follows symlinks: a link pointing out is refused, one pointing in is resolved", async () => {
    await symlink(outside, join(root, "out"));
    await symlink(join(outside, "secret"), join(root, "secret-link"));
    await symlink("src", join(root, "in"));
    expect((await refusal("out")).reason).toBe("outside_workspace");
    expect((await refusal("out/secret")).reason).toBe("outside_workspace");
    expect((await refusal("out/not-yet/file")).reason).toBe("outside_workspace");
    expect((await refusal("secret-link")).reason).toBe("outside_workspace");
    expect(await confinePath(root, "in/a.ts")).toBe(join(root, "src", "a.ts"));
  });

  it("refuses a dangling symlink whose target lies outside (writing would create it there)", async () => {
    await symlink(join(outside, "created-by-write"), join(root, "dangling"));
    expect((await refusal("dangling")).reason).toBe("outside_workspace");
  });

  it("refuses symlink loops", async () => {
    await symlink("b", join(root, "a"));
    await symlink("a", join(root, "b"));
    expect((await refusal("a/file")).reason).toBe("symlink_loop");
  });

  it("refuses NUL bytes", async () => {
    const error = await refusal("src/a.ts\0.png");
    expect(error.reason).toBe("nul_byte");
    expect(error.message).toContain("NUL");
  });

  it("works when the root itself is reached through a symlink", async () => {
    const alias = join(base, "alias");
    await symlink(root, alias);
    expect(await confinePath(alias, "src/a.ts")).toBe(join(root, "src", "a.ts"));
    expect(await confinePath(alias, join(alias, "src", "a.ts"))).toBe(join(root, "src", "a.ts"));
    expect((await refusal("../ws-evil/secret")).reason).toBe("outside_workspace");
  });

  it("reports a missing root", async () => {
    const error = await confinePath(join(base, "missing"), "x").catch((e: unknown) => e);
    expect(error).toBeInstanceOf(PathConfinementError);
    expect((error as PathConfinementError).reason).toBe("invalid_root");
  });
});
