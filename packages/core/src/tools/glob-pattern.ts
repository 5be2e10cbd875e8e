const GLOB_CHARS = /[*?[{]/;

/** The most patterns a glob's braces may stand for (`{a,b}{c,d}` is four). */
export const MAX_BRACE_PATTERNS = 1024;

/** One piece of a glob without braces. */
type Token =
  | { kind: "char"; c: string }
  /** `?`: one character but `/`. */
  | { kind: "one" }
  /** `[abc]`, `[!abc]`: one character of (or not of) the set. */
  | { kind: "class"; set: RegExp }
  /** `*`: any characters but `/`. */
  | { kind: "star" }
  /** `**` (not followed by `/`): any characters. */
  | { kind: "any" }
  /** `**` then `/`, at the start or after a `/`: nothing, or any characters that end with a `/`. */
  | { kind: "dirs" };

/** Where a `[` at `i` closes (the `]` after at least one character), or -1: it is a plain `[`. */
function classEnd(chars: string[], i: number): number {
  for (let j = i + 2; j < chars.length; j++) if (chars[j] === "]") return j;
  return -1;
}

/**
 * The globs a glob's braces stand for: `*.{js,md}` is `*.js` and `*.md` (nested ones too). An
 * unbalanced `{`, and `}` or `,` outside braces, are plain characters.
 */
function expandBraces(glob: string): string[] {
  const chars = [...glob];
  let open = -1;
  let depth = 0;
  const commas: number[] = [];
  for (let i = 0; i < chars.length; i++) {
    const c = chars[i];
    if (c === "[") {
      const end = classEnd(chars, i);
      if (end !== -1) i = end;
    } else if (c === "{") {
      if (depth === 0) open = i;
      depth += 1;
    } else if (c === "," && depth === 1) {
      commas.push(i);
    } else if (c === "}" && depth > 0) {
      depth -= 1;
      if (depth === 0) {
        const head = chars.slice(0, open).join("");
        const tails = expandBraces(chars.slice(i + 1).join(""));
        const bounds = [open, ...commas, i];
        const out: string[] = [];
        for (let k = 0; k + 1 < bounds.length; k++) {
          for (const option of expandBraces(chars.slice(bounds[k]! + 1, bounds[k + 1]).join(""))) {
            for (const tail of tails) {
              out.push(`${head}${option}${tail}`);
              if (out.length > MAX_BRACE_PATTERNS) {
                throw new Error(
                  `the pattern's braces stand for more than ${MAX_BRACE_PATTERNS} patterns`,
                );
              }
            }
          }
        }
        return out;
      }
    }
  }
  return [glob];
}

/** The tokens of a glob without braces. */
function tokenize(glob: string): Token[] {
  const chars = [...glob];
  const out: Token[] = [];
  for (let i = 0; i < chars.length; i++) {
    const c = chars[i]!;
    if (c === "*") {
      if (chars[i + 1] === "*") {
        const atStart = i === 0 || chars[i - 1] === "/";
        i += 1;
        if (atStart && chars[i + 1] === "/") {
          i += 1;
          out.push({ kind: "dirs" });
        } else {
          out.push({ kind: "any" });
        }
      } else {
        out.push({ kind: "star" });
      }
    } else if (c === "?") {
      out.push({ kind: "one" });
    } else if (c === "[" && classEnd(chars, i) !== -1) {
      const end = classEnd(chars, i);
      let body = chars.slice(i + 1, end).join("");
      const negated = body.startsWith("!") || body.startsWith("^");
      if (negated) body = body.slice(1);
      // One character against one bracket expression: no backtracking to speak of.
      out.push({
        kind: "class",
        set: new RegExp(`^[${negated ? "^" : ""}${body.replace(/\\/g, "\\\\")}]$`),
      });
      i = end;
    } else {
      out.push({ kind: "char", c });
    }
  }
  return out;
}

/**
 * A matcher that runs every way through the glob at once (a set of positions in it, one
 * step per character): time proportional to the name's length times the glob's, where a
 * regular expression's backtracking takes exponential time on `*a*a*a*a*b` against `aaaa…`.
 */
function compile(tokens: Token[]): (text: string) => boolean {
  const m = tokens.length;
  // State 2i: at token i; 2i+1: inside token i's `**/`, after a character that was not its `/`.
  const size = 2 * (m + 1);
  const close = (states: Uint8Array): Uint8Array => {
    for (let i = 0; i < m; i++) {
      const kind = tokens[i]!.kind;
      if (states[2 * i] && (kind === "star" || kind === "any" || kind === "dirs")) {
        states[2 * (i + 1)] = 1;
      }
    }
    return states;
  };
  return (text) => {
    const start = new Uint8Array(size);
    start[0] = 1;
    let current = close(start);
    for (const ch of text) {
      const next = new Uint8Array(size);
      let any = false;
      const add = (state: number) => {
        next[state] = 1;
        any = true;
      };
      for (let i = 0; i <= m; i++) {
        if (current[2 * i + 1]) {
          add(2 * i + 1);
          if (ch === "/") add(2 * (i + 1));
        }
        if (!current[2 * i] || i === m) continue;
        const t = tokens[i]!;
        switch (t.kind) {
          case "char":
            if (ch === t.c) add(2 * (i + 1));
            break;
          case "one":
            if (ch !== "/") add(2 * (i + 1));
            break;
          case "class":
            if (t.set.test(ch)) add(2 * (i + 1));
            break;
          case "star":
            if (ch !== "/") add(2 * i);
            break;
          case "any":
            add(2 * i);
            break;
          case "dirs":
            add(2 * i + 1);
            if (ch === "/") add(2 * (i + 1));
            break;
        }
      }
      if (!any) return false;
      current = close(next);
    }
    return current[2 * m] === 1;
  };
}

/** Whether the whole of a text matches the glob (`*`, `**`, `?`, `[abc]`, `[!abc]`, `{a,b}`). */
function globTest(glob: string): (text: string) => boolean {
  const tests = expandBraces(glob).map((g) => compile(tokenize(g)));
  return tests.length === 1 ? tests[0]! : (text) => tests.some((test) => test(text));
}

/**
 * A name matcher for `search_files`:
 * - a pattern without glob characters matches names containing it (case-insensitive);
 * - a glob without `/` matches an entry's name at any depth (`*.ts`, `test_*`);
 * - a glob with `/` matches the path relative to the search directory (`src/**\/*.ts`).
 * Dot-files match like any other name. Throws when the braces stand for too many patterns.
 */
export function globMatcher(pattern: string): (relativePath: string) => boolean {
  if (!GLOB_CHARS.test(pattern)) {
    const needle = pattern.toLowerCase();
    return (relativePath) => baseName(relativePath).toLowerCase().includes(needle);
  }
  const byPath = pattern.includes("/");
  const test = globTest(byPath ? pattern.replace(/^\.\//, "") : pattern);
  return byPath ? test : (relativePath) => test(baseName(relativePath));
}

function baseName(relativePath: string): string {
  return relativePath.slice(relativePath.lastIndexOf("/") + 1);
}
