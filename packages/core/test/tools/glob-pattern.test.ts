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
