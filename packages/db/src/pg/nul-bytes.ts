/** Node 20 and later have it; ES2023's lib does not declare it. */
type WellFormed = { isWellFormed(): boolean; toWellFormed(): string };

/**
 * PostgreSQL's `text` cannot hold U+0000, nor can `json` values read with its operators (SQLite
 * can): a command that prints a NUL byte would make the whole write fail. Nor can its `json`
 * operators read a lone UTF-16 surrogate (`"\ud800"`: `json` accepts it on input, then `->>`
 * and `json_array_elements` refuse the row — /metrics' reads would fail from then on), which a
 * client may send in valid JSON and a cut in the middle of an emoji leaves. Strings are stored
 * with U+FFFD in place of either.
 */
export function withoutNul<T>(value: T): T {
  if (typeof value === "string") {
    const nulFree = value.includes("\0") ? value.replaceAll("\0", "\uFFFD") : value;
    const text = nulFree as unknown as WellFormed;
    return (text.isWellFormed() ? nulFree : text.toWellFormed()) as T;
  }
  if (Array.isArray(value)) return value.map(withoutNul) as T;
  if (value !== null && typeof value === "object") {
    const out: Record<string, unknown> = {};
    // Keys too: a model names a tool call's arguments, and their names reach text columns
    // (a failure pattern's argument shape).
    for (const [k, v] of Object.entries(value)) out[withoutNul(k)] = withoutNul(v);
    return out as T;
  }
  return value;
}
