import { randomBytes } from "node:crypto";
import { realpath, writeFile } from "node:fs/promises";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ToolHub, workspaceServerLaunch } from "../../src/tools/index";
import { removeDir, tempDir } from "./helpers";

// Over real stdio: a message above the SDK client's 10 MiB closes the connection for good.

let root: string;
let hub: ToolHub;

beforeAll(async () => {
  root = await realpath(await tempDir());
  const line = `${"a".repeat(99)}\n`;
  await writeFile(`${root}/big.log`, `${line.repeat(120_000)}the last line\n`); // 12 MB
  // 20 MB in one line; the first MiB ends inside a 4-byte character.
  const huge = Buffer.alloc(20_000_000, "b");
  huge.write("😀", 1024 * 1024 - 2, "utf8");
  await writeFile(`${root}/huge.log`, huge);
  const binary = randomBytes(4 * 1024 * 1024);
  binary[10] = 0;
  await writeFile(`${root}/blob.bin`, binary);
  hub = await ToolHub.connect(
    [{ name: "ws", ...workspaceServerLaunch(root, { PATH: process.env.PATH ?? "" }), cwd: root }],
    // The hub's own cap out of the way, to see what the server sends.
    { resultCapBytes: 4 * 1024 * 1024 },
  );
});
afterAll(async () => {
  await hub.close();
  await removeDir(root);
});

describe("workspace server: reads of large files", () => {
  it("returns at most 1 MiB of a large file, says how much it left out, and stays connected", async () => {
    const whole = await hub.call("ws__read_text_file", { path: "big.log" });
    expect(whole.isError).toBe(false);
    expect(Buffer.byteLength(whole.result)).toBeLessThan(1024 * 1024 + 100);
    expect(whole.result).toMatch(/\n\[… \d+ of 12000014 bytes cut …\]$/);
    const tail = await hub.call("ws__read_text_file", { path: "big.log", tail: 2 });
    expect(tail.result).toBe(`${"a".repeat(99)}\nthe last line`);
    const list = await hub.call("ws__list_directory", { path: "." });
    expect(list).toMatchObject({ isError: false });
    expect(list.result).toContain("big.log");
  });

  it("reads the first MiB of a file of any size, up to a whole character, as head and tail do", async () => {
    const whole = await hub.call("ws__read_text_file", { path: "huge.log" });
    expect(whole.isError).toBe(false);
    const kept = 1024 * 1024 - 2;
    expect(whole.result).toBe(
      `${"b".repeat(kept)}\n[… ${20_000_000 - kept} of 20000000 bytes cut …]`,
    );
    // One line of 20 MB: head and tail ask for all of it, and get its first or last MiB.
    const head = await hub.call("ws__read_text_file", { path: "huge.log", head: 1 });
    expect(head).toEqual({ ...whole, durationMs: head.durationMs });
    const tail = await hub.call("ws__read_text_file", { path: "huge.log", tail: 1 });
    expect(tail.result).toBe(
      `[… ${20_000_000 - 1024 * 1024} bytes of the lines asked for omitted …]\n${"b".repeat(1024 * 1024)}`,
    );
  });

  it("refuses a binary file as such, and stays connected", async () => {
    const blob = await hub.call("ws__read_text_file", { path: "blob.bin" });
    expect(blob.isError).toBe(true);
    expect(blob.result).toContain("looks binary");
    expect(await hub.call("ws__list_directory", { path: "." })).toMatchObject({ isError: false });
  });
});
