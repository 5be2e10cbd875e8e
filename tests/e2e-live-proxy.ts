import { createServer, request as httpRequest, type Server } from "node:http";
import type { AddressInfo } from "node:net";

export interface DroppingProxy {
  url: string;
  /** The `last-event-id` header of each event-stream request, in order (undefined: none). */
  streamRequests: (string | undefined)[];
  close(): Promise<void>;
}

/**
 * An HTTP proxy in front of the API that cuts the first event stream right after its
 * `dropAfter`-th event (the client sees a dropped connection); everything else passes through.
 */
export async function droppingProxy(target: string, dropAfter: number): Promise<DroppingProxy> {
  const streamRequests: (string | undefined)[] = [];
  let dropped = false;
  const server: Server = createServer((req, res) => {
    const isStream = /\/events\/stream/.test(req.url ?? "");
    if (isStream) streamRequests.push(req.headers["last-event-id"] as string | undefined);
    const cut = isStream && !dropped;
    if (cut) dropped = true;
    const upstream = httpRequest(
      new URL(req.url ?? "/", target),
      { method: req.method, headers: req.headers },
      (up) => {
        res.writeHead(up.statusCode ?? 502, up.headers);
        if (!cut) {
          up.pipe(res);
          return;
        }
        let text = "";
        let sent = 0;
        let events = 0;
        let cutDone = false;
        up.on("data", (chunk: Buffer) => {
          // A chunk already read from the upstream socket may still arrive after destroy():
          // once cut, nothing more may reach the client, or it would resume past the cut.
          if (cutDone) return;
          text += chunk.toString("utf8");
          // Forward whole messages only, and stop right after the `dropAfter`-th event.
          for (let end = text.indexOf("\n\n", sent); end !== -1; end = text.indexOf("\n\n", sent)) {
            const message = text.slice(sent, end + 2);
            sent = end + 2;
            if (/^id: /m.test(message) && ++events === dropAfter) {
              cutDone = true;
              up.destroy();
              // Once the message is out, the connection ends without the final chunk (a FIN, not
              // a reset, which could discard what the client has not read yet).
              // The end comes a moment after the data: a FIN in the same segment as the last
              // bytes can make the client's fetch fail before it hands those bytes over.
              res.write(message, () => setTimeout(() => res.socket?.end(), 300));
              return;
            }
            res.write(message);
          }
        });
        up.on("end", () => {
          if (!cutDone) res.end();
        });
      },
    );
    upstream.on("error", () => res.destroy());
    req.pipe(upstream);
  });
  await new Promise<void>((ready) => server.listen(0, "127.0.0.1", ready));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    streamRequests,
    close: () =>
      new Promise<void>((done) => {
        server.closeAllConnections();
        server.close(() => done());
      }),
  };
}
