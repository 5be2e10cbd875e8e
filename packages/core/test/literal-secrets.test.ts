import { describe, expect, it } from "vitest";
import {
  literalSecretArgs,
  literalSecretNames,
  urlWritesOutSecret,
  writesOutSecret,
} from "../src/domain/literal-secrets";
import { RunSubmission } from "../src/domain/run-spec";

describe("secrets written out in a run's MCP servers", () => {
  it("tells a written-out value from references, schemes and plain settings", () => {
    expect(writesOutSecret("plainvalue0123456789")).toBe(true);
    expect(writesOutSecret("Token tkn0123456789")).toBe(true);
    expect(writesOutSecret(`\${GITHUB_TOKEN}`)).toBe(false);
    expect(writesOutSecret(`Bearer \${DOCS_TOKEN}`)).toBe(false);
    expect(writesOutSecret("4000")).toBe(false);
    expect(writesOutSecret("123456789012")).toBe(false);
  });

  it("looks at values under secret names, and at credential headers whatever they are called", () => {
    const env = {
      GITHUB_TOKEN: "ghvalue0123456789",
      LOG_LEVEL: "debugdebugdebug",
      TOKEN_LIMIT: "4000",
    };
    expect(literalSecretNames(env)).toEqual(["GITHUB_TOKEN"]);
    expect(literalSecretNames({ Authorization: "abcdefgh12345678" }, true)).toEqual([
      "Authorization",
    ]);
    expect(literalSecretNames({ Authorization: "abcdefgh12345678" })).toEqual([]);
  });

  it("finds the value of a --token-like argument, given apart or with =", () => {
    expect(literalSecretArgs(["--api-key", "zzKEY0123456789", "--port", "8080"])).toEqual([1]);
    expect(literalSecretArgs(["serve", "--token=zz0123456789"])).toEqual([1]);
    expect(literalSecretArgs(["--max-tokens", "1000", "--token", "--verbose"])).toEqual([]);
  });

  it("finds a password or a key parameter in a url", () => {
    expect(urlWritesOutSecret("https://mcp.example/mcp?key=qqSECRET0123")).toBe(true);
    expect(urlWritesOutSecret("https://user:pw@mcp.example/mcp")).toBe(true);
    expect(urlWritesOutSecret(`https://mcp.example/mcp?key=\${MCP_KEY}`)).toBe(false);
    expect(urlWritesOutSecret("https://mcp.example/mcp?page=2")).toBe(false);
  });

  it(`refuses a submission that writes one out, naming the field, and takes \${NAME} instead`, () => {
    const body = (server: Record<string, unknown>) => ({
      task: "t",
      agent: { type: "mistral" },
      testCommand: "true",
      mcpServers: [{ name: "gh", ...server }],
    });
    const refused = RunSubmission.safeParse(
      body({ command: "npx", env: { GITHUB_TOKEN: "ghvalue0123456789" } }),
    );
    expect(refused.success).toBe(false);
    expect(refused.error?.issues.map((i) => i.path.join("."))).toEqual([
      "mcpServers.0.env.GITHUB_TOKEN",
    ]);
    expect(refused.error?.issues[0]?.message).toContain(`\${NAME}`);
    expect(
      RunSubmission.safeParse(body({ command: "npx", env: { GITHUB_TOKEN: `\${GH_PAT}` } }))
        .success,
    ).toBe(true);
    expect(
      RunSubmission.safeParse(
        body({
          url: `https://mcp.example/mcp?key=\${MCP_KEY}`,
          headers: { Authorization: `Bearer \${T}` },
        }),
      ).success,
    ).toBe(true);
  });
});
