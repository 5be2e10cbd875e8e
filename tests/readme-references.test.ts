import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { REPO_ROOT } from "./support/processes";

// The README names the tests behind each guarantee, and the files it points to: they must be
// there under those names, or a reader following a guarantee to its test finds nothing.

const readme = readFileSync(join(REPO_ROOT, "README.md"), "utf8");

/** A repository path in backticks or as a Markdown link's target. */
const PATH = /(?:`|\]\()((?:tests|packages|apps|bench|drizzle|drizzle-pg|scripts)\/[\w./-]+)[`)]/g;

/**
 * Each cited test file with the test names after its arrow: `path.ts` (a note) → "name" (a
 * note), "name", … — up to the next cited path, the end of the table cell or of the line.
 */
function testReferences(text: string): { file: string; names: string[] }[] {
  const refs: { file: string; names: string[] }[] = [];
  const cited = /`((?:tests|packages|apps)\/[^`]+?\.ts)`([^`|\n]*)/g;
  for (const match of text.matchAll(cited)) {
    const after = match[2] ?? "";
    // Names follow an arrow, after at most a note in parentheses.
    const arrow = /^\s*(?:\([^)]*\)\s*)?→/.exec(after);
    const names = arrow ? [...after.matchAll(/"([^"]+)"/g)].map((m) => m[1] ?? "") : [];
    refs.push({ file: match[1] ?? "", names });
  }
  return refs;
}

/** Whether `source` declares a test of that name: as a string literal, or a template's start. */
function declares(source: string, name: string): boolean {
  const text = source.replaceAll("\\${", "${");
  // "… naming the field: …" stands for a test per case (a template literal).
  if (name.endsWith("…")) return text.includes(`\`${name.slice(0, -1).trimEnd()}`);
  return [`"${name}"`, `'${name}'`, `\`${name}\``].some((quoted) => text.includes(quoted));
}

describe("README references", () => {
  it("reads every name of a citation, past notes in parentheses, and only quoted names", () => {
    const refs = testReferences(
      '| x | `tests/a.test.ts` → "one" (a note), "two"; `packages/b/x.ts` (the suite) → "three" | "not a name" |\n' +
        'See `tests/c.test.ts`, which says "not a name either".',
    );
    expect(refs).toEqual([
      { file: "tests/a.test.ts", names: ["one", "two"] },
      { file: "packages/b/x.ts", names: ["three"] },
      { file: "tests/c.test.ts", names: [] },
    ]);
    expect(declares('it("stops a run", () => {})', "stops a run")).toBe(true);
    expect(declares('it("stops a run and more", () => {})', "stops a run")).toBe(false);
    expect(declares("// stops a run", "stops a run")).toBe(false);
    // biome-ignore lint/suspicious/noTemplateCurlyInString: the source text of a test, not a template
    expect(declares("it(`answers 400: ${name}`, f)", "answers 400: …")).toBe(true);
    // biome-ignore lint/suspicious/noTemplateCurlyInString: the source text of a test, not a template
    expect(declares("it(`puts \\${NAME} into a url`, f)", "puts ${NAME} into a url")).toBe(true);
  });

  it("names test files that exist, and tests that are in them", () => {
    const refs = testReferences(readme);
    // The guarantees table alone names more than fifty tests.
    expect(refs.flatMap((r) => r.names).length).toBeGreaterThan(50);
    const missing: string[] = [];
    for (const { file, names } of refs) {
      const path = join(REPO_ROOT, file);
      if (!existsSync(path)) {
        missing.push(file);
        continue;
      }
      const source = readFileSync(path, "utf8");
      for (const name of names) {
        if (!declares(source, name)) missing.push(`${file} → "${name}"`);
      }
    }
    expect(missing).toEqual([]);
  });

  it("points to files and folders that exist", () => {
    // What git ignores (bench/.data/, a run's scratch output) exists only once something wrote it.
    const ignored = readFileSync(join(REPO_ROOT, ".gitignore"), "utf8")
      .split("\n")
      .map((line) => line.trim().replace(/^\//, ""))
      .filter((line) => line !== "" && !line.startsWith("#"));
    const paths = new Set(
      [...readme.matchAll(PATH)]
        .map((m) => (m[1] ?? "").replace(/#.*$/, ""))
        .filter((p) => !ignored.some((prefix) => p.startsWith(prefix))),
    );
    expect(paths.size).toBeGreaterThan(10);
    expect([...paths].filter((p) => !existsSync(join(REPO_ROOT, p)))).toEqual([]);
  });
});
