import { createServer, type Server, type Socket, connect as tcpConnect } from "node:net";

/**
 * A TCP proxy in front of a PostgreSQL server, for the tests of what a server that stops
 * answering at one exact point does to looprun. `stallAfterStartup` on: a connection opened
 * from then on has its start-up answered in full (authentication, parameters, the first
 * ReadyForQuery) and then nothing more from the server — as a server that hangs right after
 * accepting a session, the point `freeze()` of a whole cluster cannot reach (a frozen server
 * does not answer the start-up either). Connections opened before are passed through.
 */
export interface PgStallProxy {
  /** The proxy's port on 127.0.0.1. */
  port: number;
  stallAfterStartup: boolean;
  /** Connections that have stalled so far. */
  readonly stalled: number;
  close(): Promise<void>;
}

/** ReadyForQuery: 'Z', a length of 5, the transaction status. */
const READY_FOR_QUERY = 0x5a;

export async function startPgStallProxy(serverPort: number): Promise<PgStallProxy> {
  const sockets = new Set<Socket>();
  let stalled = 0;
  const proxy: PgStallProxy = {
    port: 0,
    stallAfterStartup: false,
    get stalled() {
      return stalled;
    },
    close: () => closeServer(server, sockets),
  };
  const server: Server = createServer((client) => {
    const upstream = tcpConnect(serverPort, "127.0.0.1");
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on("close", () => sockets.delete(s));
      s.on("error", () => {
        client.destroy();
        upstream.destroy();
      });
    }
    client.on("close", () => upstream.destroy());
    upstream.on("close", () => client.destroy());
    client.pipe(upstream);
    if (!proxy.stallAfterStartup) {
      upstream.pipe(client);
      return;
    }
    const untilReady = new MessageReader();
    let stalling = false;
    upstream.on("data", (chunk: Buffer) => {
      if (stalling) return; // read and dropped: the client hears nothing more
      const end = untilReady.endOfReadyForQuery(chunk);
      if (end === null) {
        client.write(chunk);
        return;
      }
      client.write(chunk.subarray(0, end));
      stalling = true;
      stalled++;
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => resolve());
  });
  const address = server.address();
  proxy.port = typeof address === "object" && address ? address.port : 0;
  return proxy;
}

/** Follows the server's messages (a type byte, a 4-byte length) across chunks. */
class MessageReader {
  private header = Buffer.alloc(0);
  /** Bytes of the current message's body still to come. */
  private bodyLeft = 0;
  private type = 0;

  /** Where in `chunk` the first ReadyForQuery ends, or null if not in it. */
  endOfReadyForQuery(chunk: Buffer): number | null {
    let i = 0;
    while (i < chunk.length) {
      if (this.bodyLeft > 0) {
        const take = Math.min(this.bodyLeft, chunk.length - i);
        this.bodyLeft -= take;
        i += take;
        if (this.bodyLeft === 0 && this.type === READY_FOR_QUERY) return i;
        continue;
      }
      const need = 5 - this.header.length;
      this.header = Buffer.concat([this.header, chunk.subarray(i, i + need)]);
      i += Math.min(need, chunk.length - i);
      if (this.header.length < 5) continue;
      this.type = this.header[0] ?? 0;
      this.bodyLeft = this.header.readUInt32BE(1) - 4;
      this.header = Buffer.alloc(0);
      if (this.bodyLeft === 0 && this.type === READY_FOR_QUERY) return i;
    }
    return null;
  }
}

function closeServer(server: Server, sockets: Set<Socket>): Promise<void> {
  for (const s of sockets) s.destroy();
  return new Promise((resolve) => server.close(() => resolve()));
}
