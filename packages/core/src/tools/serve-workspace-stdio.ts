import type { Readable, Writable } from "node:stream";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { createWorkspaceServer, type WorkspaceServerOptions } from "./workspace-server";

export interface StdioWorkspaceServer {
  /** Closes the server and kills the commands it still runs. Idempotent. */
  close(): Promise<void>;
  /** Settles once the server is closed: by `close()` or because the client closed stdin. */
  readonly closed: Promise<void>;
}

/**
 * Serves the workspace server over stdio. When the client closes our stdin (its way of
 * shutting a stdio server down) the server closes, killing the commands still running.
 */
export async function serveWorkspaceOverStdio(
  opts: WorkspaceServerOptions & {
    /** @defaultValue process.stdin */
    stdin?: Readable;
    /** @defaultValue process.stdout */
    stdout?: Writable;
  },
): Promise<StdioWorkspaceServer> {
  const stdin = opts.stdin ?? process.stdin;
  const server = createWorkspaceServer(opts);
  let resolveClosed!: () => void;
  const closed = new Promise<void>((resolve) => {
    resolveClosed = resolve;
  });
  let closing: Promise<void> | undefined;
  const close = () => {
    closing ??= server.close().finally(() => {
      stdin.off("end", close);
      resolveClosed();
    });
    return closing;
  };
  stdin.once("end", close);
  await server.connect(new StdioServerTransport(stdin, opts.stdout ?? process.stdout));
  return { close, closed };
}
