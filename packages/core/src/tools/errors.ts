/** Why a tool's path argument was refused. */
export type PathRefusal = "nul_byte" | "outside_workspace" | "symlink_loop" | "invalid_root";

/** A tool's path argument does not name a place inside the workspace. */
export class PathConfinementError extends Error {
  override readonly name = "PathConfinementError";
  constructor(
    readonly reason: PathRefusal,
    readonly path: string,
    message: string,
  ) {
    super(message);
  }
}

/** An MCP server could not be started, initialised or listed (or the server list is invalid). */
export class McpConnectError extends Error {
  override readonly name = "McpConnectError";
  constructor(
    readonly server: string,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(`MCP server "${server}": ${message}`, options);
  }
}

/** A workspace tool cannot do what was asked; its message is meant for the model. */
export class ToolFailure extends Error {
  override readonly name = "ToolFailure";
}
