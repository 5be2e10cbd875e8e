/** A JSON Schema object as the function-calling APIs take it. */
export type JsonSchema = { [key: string]: unknown };

/** Meta keywords that describe the schema document, not the arguments; Mistral rejects `$schema` and `$id`. */
const META_KEYS = new Set([
  "$schema",
  "$id",
  "$comment",
  "$anchor",
  "$dynamicAnchor",
  "$vocabulary",
]);
/** Keywords whose value is a map of names to sub-schemas. */
const SCHEMA_MAPS = new Set([
  "properties",
  "patternProperties",
  "$defs",
  "definitions",
  "dependentSchemas",
]);
/** Keywords whose value is a sub-schema or an array of them. */
const SCHEMA_VALUES = new Set([
  "items",
  "additionalItems",
  "prefixItems",
  "additionalProperties",
  "unevaluatedProperties",
  "unevaluatedItems",
  "contains",
  "propertyNames",
  "not",
  "if",
  "then",
  "else",
  "allOf",
  "anyOf",
  "oneOf",
]);

function isObject(value: unknown): value is JsonSchema {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function cleanValue(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(cleanValue);
  return isObject(value) ? cleanSchema(value) : value;
}

function cleanSchema(schema: JsonSchema): JsonSchema {
  const out: JsonSchema = {};
  for (const [key, value] of Object.entries(schema)) {
    if (META_KEYS.has(key)) continue;
    if (SCHEMA_MAPS.has(key) && isObject(value)) {
      out[key] = Object.fromEntries(
        Object.entries(value).map(([name, sub]) => [name, cleanValue(sub)]),
      );
    } else if (SCHEMA_VALUES.has(key)) {
      out[key] = cleanValue(value);
    } else {
      out[key] = value;
    }
  }
  // Draft-4 boolean `exclusiveMinimum`/`exclusiveMaximum` are invalid in the drafts providers check against.
  for (const [flag, bound] of [
    ["exclusiveMinimum", "minimum"],
    ["exclusiveMaximum", "maximum"],
  ] as const) {
    if (typeof out[flag] !== "boolean") continue;
    if (out[flag] === true && typeof out[bound] === "number") {
      out[flag] = out[bound];
      delete out[bound];
    } else {
      delete out[flag];
    }
  }
  return out;
}

/**
 * A tool's input schema as Mistral accepts it for a function's `parameters`: meta keywords
 * (`$schema`, `$id`, …) removed at every level, draft-4 boolean exclusive bounds rewritten,
 * and the top level always `{ type: "object", properties: {...} }`.
 */
export function toMistralParameters(inputSchema: unknown): JsonSchema {
  const cleaned = isObject(inputSchema) ? cleanSchema(inputSchema) : {};
  return {
    ...cleaned,
    type: "object",
    properties: isObject(cleaned.properties) ? cleaned.properties : {},
  };
}
