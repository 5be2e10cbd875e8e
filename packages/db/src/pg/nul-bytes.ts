/**
 * PostgreSQL's `text` cannot hold U+0000, nor can `json` values read with its operators (SQLite
 * can): a command that prints a NUL byte would make the whole write fail. Strings are stored
 * with U+FFFD in its place.
 */
export function withoutNul<T>(value: T): T {
  if (typeof value === "string") {
    return (value.includes("\0") ? value.replaceAll("\0", "\uFFFD") : value) as T;
  }
  if (Array.isArray(value)) return value.map(withoutNul) as T;
  if (value !== null && typeof value === "object") {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) out[k] = withoutNul(v);
    return out as T;
  }
  return value;
}
