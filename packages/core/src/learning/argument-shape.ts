/**
 * The shape of a tool call's arguments: keys (sorted) and value types, one level of nesting,
 * never the values themselves — `{content:string,path:string}`. Calls of the same tool with the
 * same shape are one approach; the shape tells them apart from other uses of the tool.
 */
export function argumentShape(args: unknown, depth = 0): string {
  if (args === null) return "null";
  if (Array.isArray(args)) {
    if (depth >= 1 || args.length === 0) return "array";
    const kinds = [...new Set(args.map((a) => argumentShape(a, depth + 1)))].sort();
    return `${kinds.join("|")}[]`;
  }
  if (typeof args === "object") {
    if (depth >= 1) return "object";
    const keys = Object.keys(args as object).sort();
    return `{${keys.map((k) => `${k}:${argumentShape((args as Record<string, unknown>)[k], depth + 1)}`).join(",")}}`;
  }
  return typeof args;
}
