import { execFileSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { mkdir, readFile, realpath, symlink, writeFile } from "node:fs/promises";
import { join } from "node:path";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { createWorkspaceServer } from "../../src/tools/index";
import { connectInMemory, isAlive, removeDir, tempDir, textOf, waitFor } from "./helpers";

const ENV = { PATH: process.env.PATH ?? "/usr/local/bin:/usr/bin:/bin", LOOPRUN_GIVEN: "yes" };

let base: string;
let root: string;
let client: Client;

async function call(name: string, args: Record<string, unknown>) {
  const result = await client.callTool({ name, arguments: args });
  return { isError: result.isError === true, text: textOf(result) };
}

beforeEach(async () => {
  base = await realpath(await tempDir());
  root = join(base, "ws");
  await mkdir(join(root, "src", "deep"), { recursive: true });
  await mkdir(join(base, "ws-evil"));
  await writeFile(join(base, "ws-evil", "secret"), "top secret\n");
  await writeFile(join(base, "outside.txt"), "outside\n");
  await writeFile(join(root, "notes.md"), "one\ntwo\nthree\nfour\nfive\n");
  await writeFile(join(root, "src", "app.ts"), 'export const greeting = "hello";\n');
  await writeFile(join(root, "src", "deep", "util.ts"), "export {};\n");
  await writeFile(join(root, "src", "deep", "util.test.ts"), "test\n");
  client = await connectInMemory(
    createWorkspaceServer({
      root,
      commandEnv: ENV,
      commandTimeoutMs: 10_000,
      outputCapBytes: 4096,
    }),
  );
});
afterEach(async () => {
  await client.close();
  await removeDir(base);
});

describe("workspace server: tools", () => {
  it("is named workspace and offers the reference filesystem tool shapes plus run_command", async () => {
    expect(client.getServerVersion()?.name).toBe("workspace");
    const { tools } = await client.listTools();
    const byName = Object.fromEntries(tools.map((t) => [t.name, t.inputSchema]));
    expect(Object.keys(byName).sort()).toEqual(
      [
        "edit_file",
        "list_directory",
        "read_text_file",
        "run_command",
        "search_files",
        "write_file",
      ].sort(),
    );
    expect(byName.read_text_file?.required).toEqual(["path"]);
    expect(Object.keys(byName.read_text_file?.properties ?? {}).sort()).toEqual([
      "head",
      "path",
      "tail",
    ]);
    expect(byName.write_file?.required).toEqual(["path", "content"]);
    expect(Object.keys(byName.edit_file?.properties ?? {}).sort()).toEqual([
      "dryRun",
      "edits",
      "path",
    ]);
    expect(Object.keys(byName.search_files?.properties ?? {}).sort()).toEqual([
      "excludePatterns",
      "path",
      "pattern",
    ]);
    expect(byName.run_command?.required).toEqual(["command"]);
  });

  it("read_text_file reads whole files, or their head or tail", async () => {
    expect(await call("read_text_file", { path: "notes.md" })).toEqual({
      isError: false,
      text: "one\ntwo\nthree\nfour\nfive\n",
    });
    expect((await call("read_text_file", { path: "notes.md", head: 2 })).text).toBe("one\ntwo");
    expect((await call("read_text_file", { path: "notes.md", tail: 2 })).text).toBe("four\nfive");
    expect((await call("read_text_file", { path: join(root, "notes.md"), tail: 1 })).text).toBe(
      "five",
    );
    const both = await call("read_text_file", { path: "notes.md", head: 1, tail: 1 });
    expect(both.isError).toBe(true);
    const missing = await call("read_text_file", { path: "nope.txt" });
    expect(missing).toEqual({ isError: true, text: "no such file or directory: nope.txt" });
  });

  it("write_file creates files and their parent directories", async () => {
    const result = await call("write_file", { path: "out/new/file.txt", content: "héllo" });
    expect(result.isError).toBe(false);
    expect(result.text).toContain("out/new/file.txt");
    expect(await readFile(join(root, "out", "new", "file.txt"), "utf8")).toBe("héllo");
  });

  it("edit_file replaces text, returns a unified diff, and leaves the file alone on dryRun", async () => {
    const dry = await call("edit_file", {
      path: "src/app.ts",
      edits: [{ oldText: '"hello"', newText: '"bonjour"' }],
      dryRun: true,
    });
    expect(dry.isError).toBe(false);
    expect(dry.text).toContain("--- a/src/app.ts");
    expect(dry.text).toContain('-export const greeting = "hello";');
    expect(dry.text).toContain('+export const greeting = "bonjour";');
    expect(await readFile(join(root, "src", "app.ts"), "utf8")).toContain('"hello"');

    const real = await call("edit_file", {
      path: "src/app.ts",
      edits: [{ oldText: '"hello"', newText: '"bonjour"' }],
    });
    expect(real.isError).toBe(false);
    expect(real.text).toContain("@@ -1 +1 @@");
    expect(await readFile(join(root, "src", "app.ts"), "utf8")).toBe(
      'export const greeting = "bonjour";\n',
    );
  });

  it("edit_file refuses a file that is not UTF-8 rather than turning its other bytes into U+FFFD", async () => {
    const latin1 = Buffer.from("caf\xe9 ok\nline2\n", "latin1");
    await writeFile(join(root, "latin1.txt"), latin1);
    const result = await call("edit_file", {
      path: "latin1.txt",
      edits: [{ oldText: "line2", newText: "LINE2" }],
    });
    expect(result.isError).toBe(true);
    expect(result.text).toContain("latin1.txt is not UTF-8 text");
    expect(await readFile(join(root, "latin1.txt"))).toEqual(latin1);
  });

  it("edit_file refuses a FIFO as no regular file (not as a file without the text)", async () => {
    execFileSync("mkfifo", [join(root, "pipe")]);
    const result = await call("edit_file", {
      path: "pipe",
      edits: [{ oldText: "a", newText: "b" }],
    });
    expect(result).toEqual({
      isError: true,
      text: "it is not a regular file (a FIFO): this tool edits files",
    });
  });

  it("edit_file fails as data, changing nothing, when oldText is missing or ambiguous", async () => {
    const missing = await call("edit_file", {
      path: "notes.md",
      edits: [{ oldText: "six", newText: "6" }],
    });
    expect(missing.isError).toBe(true);
    expect(missing.text).toContain("not found");
    await writeFile(join(root, "dup.txt"), "x\nx\n");
    const ambiguous = await call("edit_file", {
      path: "dup.txt",
      edits: [{ oldText: "x", newText: "y" }],
    });
    expect(ambiguous.isError).toBe(true);
    expect(ambiguous.text).toContain("matches 2 places");
    expect(await readFile(join(root, "dup.txt"), "utf8")).toBe("x\nx\n");
  });

  it("list_directory marks files and directories", async () => {
    const result = await call("list_directory", { path: "." });
    expect(result).toEqual({ isError: false, text: "[FILE] notes.md\n[DIR] src" });
    expect((await call("list_directory", { path: "src" })).text).toBe("[FILE] app.ts\n[DIR] deep");
  });

  it("list_directory lists 2,000 entries by name and counts the rest", async () => {
    await mkdir(join(root, "many"));
    const names = Array.from({ length: 2003 }, (_, i) => `f${String(i).padStart(5, "0")}`);
    for (const name of names) await writeFile(join(root, "many", name), "");
    const { isError, text } = await call("list_directory", { path: "many" });
    expect(isError).toBe(false);
    const lines = text.split("\n");
    expect(lines).toHaveLength(2001);
    expect(lines.slice(0, 2000)).toEqual(names.slice(0, 2000).map((n) => `[FILE] ${n}`));
    expect(lines[2000]).toBe(
      "[… 3 more entries not listed (2003 in all); search_files finds names by pattern …]",
    );
  });

  it("search_files matches names recursively, honours excludes and stays inside", async () => {
    await symlink(join(base, "ws-evil"), join(root, "src", "evil-link"));
    const ts = await call("search_files", { path: ".", pattern: "*.ts" });
    expect(ts.text.split("\n")).toEqual([
      "src/app.ts",
      "src/deep/util.test.ts",
      "src/deep/util.ts",
    ]);
    const excluded = await call("search_files", {
      path: "src",
      pattern: "*.ts",
      excludePatterns: ["*.test.ts"],
    });
    expect(excluded.text.split("\n")).toEqual(["src/app.ts", "src/deep/util.ts"]);
    const byPath = await call("search_files", { path: ".", pattern: "src/deep/*.ts" });
    expect(byPath.text.split("\n")).toEqual(["src/deep/util.test.ts", "src/deep/util.ts"]);
    expect((await call("search_files", { path: ".", pattern: "UTIL" })).text.split("\n")).toEqual([
      "src/deep/util.test.ts",
      "src/deep/util.ts",
    ]);
    expect((await call("search_files", { path: ".", pattern: "secret" })).text).toBe(
      "No matches found",
    );
    expect((await call("search_files", { path: "..", pattern: "*" })).isError).toBe(true);
  });
});

describe("workspace server: confinement", () => {
  it("refuses ../, absolute paths outside, the /root-evil sibling and NUL bytes, as tool errors", async () => {
    const attempts: Record<string, unknown>[] = [
      { path: "../outside.txt" },
      { path: "src/../../outside.txt" },
      { path: join(base, "outside.txt") },
      { path: "/etc/passwd" },
      { path: `${root}-evil/secret` },
      { path: "../ws-evil/secret" },
      { path: "notes.md\0" },
    ];
    for (const args of attempts) {
      const result = await call("read_text_file", args);
      expect(result.isError, JSON.stringify(args)).toBe(true);
      expect(result.text).not.toContain("top secret");
      expect(result.text).not.toContain("outside\n");
    }
    expect((await call("read_text_file", { path: "notes.md\0" })).text).toContain("NUL byte");
    expect((await call("read_text_file", { path: `${root}-evil/secret` })).text).toContain(
      "outside the workspace",
    );
  });

  it("refuses to read or write through a symlink pointing out", async () => {
    await symlink(join(base, "ws-evil"), join(root, "evil"));
    await symlink(join(base, "outside.txt"), join(root, "outside-link"));
    await symlink(join(base, "ws-evil", "planted"), join(root, "dangling"));
    expect((await call("read_text_file", { path: "evil/secret" })).isError).toBe(true);
    expect((await call("read_text_file", { path: "outside-link" })).isError).toBe(true);
    expect((await call("list_directory", { path: "evil" })).isError).toBe(true);
    expect((await call("write_file", { path: "evil/planted", content: "x" })).isError).toBe(true);
    expect((await call("write_file", { path: "dangling", content: "x" })).isError).toBe(true);
    expect(
      (await call("edit_file", { path: "outside-link", edits: [{ oldText: "o", newText: "p" }] }))
        .isError,
    ).toBe(true);
    expect(existsSync(join(base, "ws-evil", "planted"))).toBe(false);
    expect(await readFile(join(base, "outside.txt"), "utf8")).toBe("outside\n");
  });
});

describe("workspace server: run_command", () => {
  it("runs in the root and returns the exit code and output; non-zero exit is an error", async () => {
    const ok = await call("run_command", { command: "pwd; echo out; echo err >&2" });
    expect(ok.isError).toBe(false);
    expect(ok.text).toMatch(/^exit code 0 \(\d+ ms\)\n/);
    expect(ok.text).toContain(`${root}\nout\nerr\n`);
    const failed = await call("run_command", { command: "echo broken; exit 3" });
    expect(failed.isError).toBe(true);
    expect(failed.text).toMatch(/^exit code 3 /);
    expect(failed.text).toContain("broken");
  });

  it("gives commands exactly commandEnv: a variable not given is absent", async () => {
    process.env.LOOPRUN_TOOLS_TEST_SECRET = "leaked";
    try {
      const result = await call("run_command", { command: "env" });
      expect(result.text).toContain("LOOPRUN_GIVEN=yes");
      expect(result.text).not.toContain("LOOPRUN_TOOLS_TEST_SECRET");
      expect(result.text).not.toContain("leaked");
      expect(result.text).not.toMatch(/^HOME=/m);
    } finally {
      delete process.env.LOOPRUN_TOOLS_TEST_SECRET;
    }
  });

  it("caps the output, keeping its end", async () => {
    const result = await call("run_command", {
      command: "head -c 20000 /dev/zero | tr '\\0' a; echo; echo THE-END",
    });
    expect(result.isError).toBe(false);
    expect(result.text).toContain("THE-END");
    expect(result.text).toContain("bytes of earlier output omitted");
    expect(Buffer.byteLength(result.text)).toBeLessThan(4096 + 200);
  });

  it("kills the whole process group at the timeout", async () => {
    const started = Date.now();
    const result = await call("run_command", {
      command: "sleep 30 & echo $! > bg.pid; echo $$ > sh.pid; wait",
      // Long enough for `sh` to write both pids on a loaded machine.
      timeoutMs: 3000,
    });
    expect(Date.now() - started).toBeLessThan(10_000);
    expect(result.isError).toBe(true);
    expect(result.text).toContain("timed out after 3000 ms");
    for (const file of ["bg.pid", "sh.pid"]) {
      const pid = Number(await readFile(join(root, file), "utf8"));
      await waitFor(() => !isAlive(pid), `process ${file} to die`);
    }
  });

  it("never waits longer than commandTimeoutMs, whatever the call asks", async () => {
    const short = await connectInMemory(
      createWorkspaceServer({ root, commandEnv: ENV, commandTimeoutMs: 300 }),
    );
    try {
      const result = await short.callTool({
        name: "run_command",
        arguments: { command: "sleep 30", timeoutMs: 600_000 },
      });
      expect(result.isError).toBe(true);
      expect(textOf(result)).toContain("timed out after 300 ms");
    } finally {
      await short.close();
    }
  });

  it("kills running commands when the connection closes", async () => {
    const pending = client.callTool({
      name: "run_command",
      arguments: { command: "echo $$ > sh.pid; sleep 30" },
    });
    pending.catch(() => {});
    await waitFor(
      () => existsSync(join(root, "sh.pid")) && readFileSyncSafe(join(root, "sh.pid")) !== "",
      "sh.pid",
    );
    const pid = Number(readFileSyncSafe(join(root, "sh.pid")));
    expect(isAlive(pid)).toBe(true);
    await client.close();
    await waitFor(() => !isAlive(pid), "the command to be killed");
  });
});

function readFileSyncSafe(path: string): string {
  try {
    return readFileSync(path, "utf8").trim();
  } catch {
    return "";
  }
}
