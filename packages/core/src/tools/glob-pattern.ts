const GLOB_CHARS = /[*?[{]/;

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\/]/g, "\\$&");
}

/** Translates a glob (`*`, `**`, `?`, `[abc]`, `[!abc]`, `{a,b}`) to a regular expression source. */
function globSource(glob: string): string {
  let out = "";
  let braceDepth = 0;
  for (let i = 0; i < glob.length; i++) {
    const c = glob[i]!;
    if (c === "*") {
      if (glob[i + 1] === "*") {
        const atStart = i === 0 || glob[i - 1] === "/";
        i += 1;
        if (atStart && glob[i + 1] === "/") {
          // `**/` matches zero or more whole directories.
          i += 1;
          out += "(?:.*/)?";
        } else {
          out += ".*";
        }
      } else {
        out += "[^/]*";
      }
    } else if (c === "?") {
      out += "[^/]";
    } else if (c === "[") {
      const close = glob.indexOf("]", i + 2);
      if (close === -1) {
        out += "\\[";
      } else {
        let body = glob.slice(i + 1, close);
        const negated = body.startsWith("!") || body.startsWith("^");
        if (negated) body = body.slice(1);
        out += `[${negated ? "^" : ""}${body.replace(/\\/g, "\\\\")}]`;
        i = close;
      }
    } else if (c === "{") {
      braceDepth += 1;
      out += "(?:";
    } else if (c === "}" && braceDepth > 0) {
      braceDepth -= 1;
      out += ")";
    } else if (c === "," && braceDepth > 0) {
      out += "|";
    } else {
      out += escapeRegExp(c);
    }
  }
  // An unbalanced `{` is taken literally rather than failing the whole search.
  return braceDepth > 0 ? escapeRegExp(glob) : out;
}

/**
 * A name matcher for `search_files`:
 * - a pattern without glob characters matches names containing it (case-insensitive);
 * - a glob without `/` matches an entry's name at any depth (`*.ts`, `test_*`);
 * - a glob with `/` matches the path relative to the search directory (`src/**\/*.ts`).
 * Dot-files match like any other name.
 */
export function globMatcher(pattern: string): (relativePath: string) => boolean {
  if (!GLOB_CHARS.test(pattern)) {
    const needle = pattern.toLowerCase();
    return (relativePath) => baseName(relativePath).toLowerCase().includes(needle);
  }
  const byPath = pattern.includes("/");
  const regex = new RegExp(`^${globSource(byPath ? pattern.replace(/^\.\//, "") : pattern)}$`);
  return byPath
    ? (relativePath) => regex.test(relativePath)
    : (relativePath) => regex.test(baseName(relativePath));
}

function baseName(relativePath: string): string {
  return relativePath.slice(relativePath.lastIndexOf("/") + 1);
}
