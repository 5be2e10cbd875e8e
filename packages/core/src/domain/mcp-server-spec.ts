import { z } from "zod";
import { literalSecretArgs, literalSecretNames, urlWritesOutSecret } from "./literal-secrets";
import { NO_NUL, SPEC_LIMITS } from "./spec-limits";

/**
 * A record whose keys must match `pattern`: checked as a refinement, not as the key's own
 * schema, so that a bad key of an MCP server is named where it is (`mcpServers.0.env.A=B`)
 * rather than failing the server's whole union.
 */
const keyedRecord = (pattern: RegExp, message: string, value: z.ZodType<string>) =>
  z.record(z.string(), value).superRefine((record, ctx) => {
    for (const key of Object.keys(record))
      if (!pattern.test(key)) ctx.addIssue({ code: "custom", path: [key], message });
  });
/** A variable of a server's environment: a name a shell can set, a value without NUL. */
const envVars = keyedRecord(
  /^[A-Za-z_][A-Za-z0-9_]*$/,
  "must be a variable name ([A-Za-z_][A-Za-z0-9_]*)",
  z.string().refine(...NO_NUL),
);
/** HTTP headers: names that are tokens (RFC 9110), values on one line. */
const httpHeaders = keyedRecord(
  /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/,
  "must be a header name",
  z.string().refine((value) => !/[\0\r\n]/.test(value), "must be one line, without NUL"),
);
function isHttpUrl(text: string): boolean {
  if (!URL.canParse(text)) return false;
  const { protocol } = new URL(text);
  return protocol === "http:" || protocol === "https:";
}

const serverName = z.string().regex(/^[A-Za-z0-9_-]{1,32}$/, "must match [A-Za-z0-9_-]{1,32}");

/** An MCP server a run adds to the mistral agent's tools: a stdio command or a Streamable HTTP url. */
export const McpServerSpec = z
  .union([
    z.strictObject({
      name: serverName,
      command: z
        .string()
        .min(1)
        .max(SPEC_LIMITS.command)
        .refine(...NO_NUL),
      args: z
        .array(
          z
            .string()
            .max(SPEC_LIMITS.command)
            .refine(...NO_NUL),
        )
        .max(SPEC_LIMITS.listItems)
        .default([]),
      env: envVars.default({}),
    }),
    z.strictObject({
      name: serverName,
      // Not z.url(): its `format: uri` in the OpenAPI document refuses the `${NAME}` a url may hold.
      url: z
        .string()
        .max(SPEC_LIMITS.command)
        .refine(isHttpUrl, "must be an http:// or https:// URL"),
      headers: httpHeaders.default({}),
    }),
  ])
  .superRefine((server, ctx) => {
    const refuse = (path: (string | number)[], what: string) =>
      ctx.addIssue({
        code: "custom",
        path,
        message: `${what} is written out: a run's settings are stored, so name a variable of the workers instead (\${NAME}, allowed by AGENT_ENV_ALLOWLIST)`,
      });
    if ("url" in server) {
      if (urlWritesOutSecret(server.url))
        refuse(["url"], "a credential (a password or a key parameter)");
      for (const name of literalSecretNames(server.headers, true))
        refuse(["headers", name], "a secret");
      return;
    }
    for (const name of literalSecretNames(server.env)) refuse(["env", name], "a secret");
    for (const i of literalSecretArgs(server.args)) refuse(["args", i], "a secret");
  });
export type McpServerSpec = z.infer<typeof McpServerSpec>;
