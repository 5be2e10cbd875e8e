import { execFileSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { open, realpath, writeFile } from "node:fs/promises";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { MAX_RETURN_BYTES, readTextFile } from "../../src/tools/read-text-file";
import { capHead, capHeadBytes, capTail } from "../../src/util/cut-marks";
import { removeDir, tempDir } from "./helpers";

let root: string;
beforeAll(async () => {
  root = await realpath(await tempDir());
});
afterAll(async () => {
  await removeDir(root);
});

/** What read_text_file answers, from the whole text split into lines (as it once read it). */
function reference(bytes: Buffer, opts: { head?: number; tail?: number }): string {
  if (opts.head === undefined && opts.tail === undefined)
    return capHeadBytes(bytes, MAX_RETURN_BYTES);
  const lines = bytes.toString("utf8").split("\n");
  if (lines[lines.length - 1] === "") lines.pop();
  if (opts.head !== undefined)
    return capHead(lines.slice(0, opts.head).join("\n"), MAX_RETURN_BYTES);
  const tail = opts.tail ?? 0;
  return tail === 0
    ? ""
    : capTail(lines.slice(-tail).join("\n"), MAX_RETURN_BYTES, "the lines asked for");
}

/** A small deterministic generator (mulberry32), so that a failure reproduces. */
function random(seed: number): () => number {
  let a = seed;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Text of lines of every length: empty ones, short ones, ones longer than a read's chunk or
 * than what is returned, in characters of 1 to 4 bytes; ending with a newline or not, or two. */
function text(next: () => number, maxBytes: number): Buffer {
  const pieces = ["a", "é", "€", "😀", "xyz", " "];
  const lines: string[] = [];
  let bytes = 0;
  const target = Math.floor(next() * maxBytes);
  while (bytes < target) {
    const shape = next();
    const length =
      shape < 0.2 ? 0 : shape < 0.8 ? Math.floor(next() * 80) : Math.floor(next() * 300_000);
    const piece = pieces[Math.floor(next() * pieces.length)] ?? "a";
    const line = piece.repeat(Math.max(0, Math.floor(length / Buffer.byteLength(piece))));
    lines.push(line);
    bytes += Buffer.byteLength(line) + 1;
  }
  const ending = next();
  return Buffer.from(lines.join("\n") + (ending < 0.5 ? "\n" : ending < 0.7 ? "\n\n" : ""));
}

describe("readTextFile", () => {
  it("answers head, tail and plain reads as the whole text split into lines would, capped", async () => {
    const next = random(20261124);
    for (let file = 0; file < 60; file++) {
      const bytes = text(next, file % 10 === 9 ? 3_000_000 : 400_000);
      const path = `${root}/f${file}.txt`;
      await writeFile(path, bytes);
      const lineCount = bytes.toString().split("\n").length;
      const counts = [0, 1, 2, 3, Math.floor(next() * (lineCount + 3)), lineCount, 1_000_000];
      const asks = [{}, ...counts.flatMap((n) => [{ head: n }, { tail: n }])];
      for (const ask of asks) {
        const got = await readTextFile(path, ask);
        expect(got, `file ${file} (${bytes.length} bytes), ${JSON.stringify(ask)}`).toBe(
          reference(bytes, ask),
        );
      }
    }
  });

  it("reads head and tail of a file of any size, no more of it than their lines", async () => {
    // 40 MB of lines, past the 16 MiB that head and tail once read whole.
    const path = `${root}/huge.log`;
    const file = await open(path, "w");
    const block = `${"x".repeat(99)}\n`.repeat(10_000);
    for (let i = 0; i < 40; i++) await file.write(block);
    await file.write("second to last\nthe last line\n");
    await file.close();
    expect(await readTextFile(path, { tail: 2 })).toBe("second to last\nthe last line");
    expect(await readTextFile(path, { head: 2 })).toBe(`${"x".repeat(99)}\n${"x".repeat(99)}`);
    // All but the first line: the last MiB of them, saying how much of them was left out.
    const lines = 400_002;
    const asked = 40_000_000 - 100 + 15 + 13;
    const most = await readTextFile(path, { tail: lines - 1 });
    expect(
      most.startsWith(`[… ${asked - MAX_RETURN_BYTES} bytes of the lines asked for omitted …]\n`),
    ).toBe(true);
    expect(most.endsWith("\nsecond to last\nthe last line")).toBe(true);
  });

  it("reads a file to its end whatever size it tells (procfs tells 0)", async () => {
    const text = await readTextFile("/proc/self/status", {});
    expect(text).toMatch(/^Name:\t/);
    expect(text).toContain(`\nPid:\t${process.pid}\n`);
    expect(await readTextFile("/proc/self/status", { head: 1 })).toMatch(/^Name:\t\S+$/);
    const whole = readFileSync("/proc/self/status", "utf8").trimEnd().split("\n");
    const last = await readTextFile("/proc/self/status", { tail: 1 });
    expect(last.split("\t")[0]).toBe(whole[whole.length - 1]?.split("\t")[0]);
  });

  // procfs tells 0 for a file of megabytes: the cut line still gives its whole length.
  const kallsyms = "/proc/kallsyms";
  const long = (() => {
    try {
      return readFileSync(kallsyms).length > 2 * 1024 * 1024;
    } catch {
      return false;
    }
  })();
  it.runIf(long)("gives the whole length of a long file that tells 0 in its cut line", async () => {
    const whole = readFileSync(kallsyms).length;
    const text = await readTextFile(kallsyms, {});
    expect(text).toMatch(new RegExp(`\\n\\[… \\d+ of ${whole} bytes cut …\\]$`));
  });

  // sysfs tells 4096 for a file of a few bytes: its end is not where its size says.
  const sysfs = "/sys/class/net/lo/mtu";
  it.runIf(existsSync(sysfs))(
    "reads the tail of a file that holds less than its size",
    async () => {
      const text = readFileSync(sysfs, "utf8").trimEnd();
      expect(await readTextFile(sysfs, { tail: 1 })).toBe(text);
      expect(await readTextFile(sysfs, { head: 1 })).toBe(text);
    },
  );

  it("cuts bytes that are not UTF-8 anywhere, keeping the MiB asked for", async () => {
    const path = `${root}/latin.txt`;
    await writeFile(path, Buffer.concat([Buffer.from("ok\n"), Buffer.alloc(2_000_000, 0x80)]));
    for (const ask of [{}, { head: 2 }, { tail: 1 }]) {
      const text = await readTextFile(path, ask);
      // Each byte reads as a replacement character: about a MiB of them, besides the cut line.
      expect(text.length, JSON.stringify(ask)).toBeGreaterThan(1_000_000);
    }
  });

  it("refuses a binary file, whichever part is asked for", async () => {
    const path = `${root}/blob.bin`;
    await writeFile(
      path,
      Buffer.concat([Buffer.from("text\n"), Buffer.alloc(1), Buffer.from("\nmore\n")]),
    );
    for (const ask of [{}, { head: 1 }, { tail: 1 }]) {
      await expect(readTextFile(path, ask)).rejects.toThrow(/looks binary/);
    }
  });

  it("refuses a FIFO at once rather than waiting for something to write into it", async () => {
    const path = `${root}/fifo`;
    execFileSync("mkfifo", [path]);
    for (const ask of [{}, { head: 1 }, { tail: 1 }]) {
      await expect(readTextFile(path, ask)).rejects.toThrow("it is not a regular file (a FIFO)");
    }
  });
});
