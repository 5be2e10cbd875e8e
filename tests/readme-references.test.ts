import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { REPO_ROOT } from "./support/processes";

// The README names the tests behind each guarantee, and the files it points to: they must be
// there under those names, or a reader following a guarantee to its test finds nothing.

const readme = readFileSync(join(REPO_ROOT, "README.md"), "utf8");

/** `path/to/x.test.ts` (an optional note in parentheses) → "name", "name", … */
function testReferences(): { file: string; names: string[] }[] {
  const refs: { file: string; names: string[] }[] = [];
  const pattern =
    /`((?:tests|packages|apps)\/[^`]+?\.test\.ts)`(?: \([^)]*\))?((?: → (?:"[^"]+"(?:, )?)+)?)/g;
  for (const match of readme.matchAll(pattern)) {
    const names = [...(match[2] ?? "").matchAll(/"([^"]+)"/g)].map((m) => m[1] ?? "");
    refs.push({ file: match[1] ?? "", names });
  }
  return refs;
}

describe("README references", () => {
  it("names test files that exist, and tests that are in them", () => {
    const refs = testReferences();
    // The guarantees table alone names more than forty tests.
    expect(refs.flatMap((r) => r.names).length).toBeGreaterThan(40);
    const missing: string[] = [];
    for (const { file, names } of refs) {
      const path = join(REPO_ROOT, file);
      if (!existsSync(path)) {
        missing.push(file);
        continue;
      }
      const source = readFileSync(path, "utf8");
      for (const name of names) {
        // "… naming the field: …" stands for a test per case (a template literal).
        const literal = name.replace(/:? …$/, "");
        if (!source.includes(literal)) missing.push(`${file} → "${name}"`);
      }
    }
    expect(missing).toEqual([]);
  });

  it("points to files that exist", () => {
    const paths = new Set(
      [...readme.matchAll(/`((?:tests|packages|apps|bench|drizzle)\/[\w./-]+\.\w+)`/g)].map(
        (m) => m[1] ?? "",
      ),
    );
    expect(paths.size).toBeGreaterThan(10);
    expect([...paths].filter((p) => !existsSync(join(REPO_ROOT, p)))).toEqual([]);
  });
});
