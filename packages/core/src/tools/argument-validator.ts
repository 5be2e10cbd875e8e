import { Ajv, type ErrorObject, type ValidateFunction } from "ajv";

/** The dotted path of an argument (`edits.0.oldText`) from ajv's JSON pointer. */
function dotted(instancePath: string, child?: string): string {
  const parts = instancePath
    .split("/")
    .slice(1)
    .map((p) => p.replace(/~1/g, "/").replace(/~0/g, "~"));
  if (child !== undefined) parts.push(child);
  return parts.join(".");
}

function describe(error: ErrorObject): string {
  const params = error.params as Record<string, unknown>;
  switch (error.keyword) {
    case "required":
      return `missing required argument "${dotted(error.instancePath, String(params.missingProperty))}"`;
    case "additionalProperties":
      return `unknown argument "${dotted(error.instancePath, String(params.additionalProperty))}"`;
    default: {
      const at = dotted(error.instancePath);
      return `${at === "" ? "arguments" : `"${at}"`} ${error.message ?? "is invalid"}`;
    }
  }
}

/** Checks tool arguments against the tools' JSON Schemas before a call leaves the process. */
export class ArgumentValidator {
  // Formats are not checked (the server does), schemas' `$id`s are not registered (two
  // servers may reuse one), and unknown keywords of newer drafts are ignored, not fatal.
  private readonly ajv = new Ajv({
    allErrors: true,
    strict: false,
    validateFormats: false,
    addUsedSchema: false,
    logger: false,
  });

  /**
   * A validation function for `schema`: it returns the problems as sentences (empty when the
   * arguments are valid). A schema ajv cannot compile is not checked here; the server still
   * validates.
   */
  compile(schema: unknown): (args: unknown) => string[] {
    let validate: ValidateFunction;
    try {
      const { $schema: _ignored, ...rest } = (schema ?? {}) as Record<string, unknown>;
      validate = this.ajv.compile(rest);
    } catch {
      return () => [];
    }
    return (args) => (validate(args) ? [] : (validate.errors ?? []).map(describe));
  }
}
