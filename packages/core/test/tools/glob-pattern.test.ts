import { describe, expect, it } from "vitest";
import { globMatcher } from "../../src/tools/glob-pattern";

function matches(pattern: string, paths: string[]): string[] {
  const match = globMatcher(pattern);
  return paths.filter(match);
}

const PATHS = ["a.ts", "src/b.ts", "src/deep/c.test.ts", "src/deep/d.js", ".env", "docs/README.md"];

describe("globMatcher", () => {
  it("matches names at any depth when the pattern has no slash", () => {
    expect(matches("*.ts", PATHS)).toEqual(["a.ts", "src/b.ts", "src/deep/c.test.ts"]);
    expect(matches("*.{js,md}", PATHS)).toEqual(["src/deep/d.js", "docs/README.md"]);
    expect(matches("?.ts", PATHS)).toEqual(["a.ts", "src/b.ts"]);
    expect(matches("[ab].ts", PATHS)).toEqual(["a.ts", "src/b.ts"]);
    expect(matches("[!a].ts", PATHS)).toEqual(["src/b.ts"]);
    expect(matches(".*", PATHS)).toEqual([".env"]);
  });

  it("matches relative paths when the pattern has a slash", () => {
    expect(matches("src/*.ts", PATHS)).toEqual(["src/b.ts"]);
    expect(matches("src/**/*.ts", PATHS)).toEqual(["src/b.ts", "src/deep/c.test.ts"]);
    expect(matches("**/*.js", PATHS)).toEqual(["src/deep/d.js"]);
  });

  it("treats plain text as a case-insensitive name substring", () => {
    expect(matches("readme", PATHS)).toEqual(["docs/README.md"]);
    expect(matches("deep", PATHS)).toEqual([]);
  });
});

describe("globMatcher on what it is given by a model", () => {
  it("takes time in proportion to the name, however many stars the glob has", () => {
    // As a regular expression, ^(?:[^/]*a){14}[^/]*b$ against 200 a's backtracks for hours.
    const match = globMatcher(`${"*a".repeat(14)}*b`);
    expect(match("a".repeat(200))).toBe(false);
    expect(match(`${"a".repeat(200)}b`)).toBe(true);
    const deep = globMatcher(`${"**/a".repeat(10)}/**/b`);
    expect(deep(`${"a/".repeat(200)}c`)).toBe(false);
    expect(deep(`${"a/".repeat(200)}b`)).toBe(true);
  });

  it("matches as before: ** across directories, **/ for none or some, classes, nested braces", () => {
    expect(matches("**/c.*.ts", PATHS)).toEqual(["src/deep/c.test.ts"]);
    expect(matches("src/**", PATHS)).toEqual(["src/b.ts", "src/deep/c.test.ts", "src/deep/d.js"]);
    expect(matches("src/**.ts", PATHS)).toEqual(["src/b.ts", "src/deep/c.test.ts"]);
    expect(matches("src/**/d.js", PATHS)).toEqual(["src/deep/d.js"]);
    expect(matches("*.{t{s,x},md}", PATHS)).toEqual([
      "a.ts",
      "src/b.ts",
      "src/deep/c.test.ts",
      "docs/README.md",
    ]);
    expect(matches("[{]*", ["{x", "x"])).toEqual(["{x"]);
    expect(matches("a{b", ["a{b", "ab"])).toEqual(["a{b"]);
    expect(matches("é?", ["éa", "ea"])).toEqual(["éa"]);
  });

  it("refuses braces that stand for more patterns than it tries", () => {
    expect(() => globMatcher("{a,b}".repeat(11))).toThrow(/more than 1024 patterns/);
  });
});
