import { Agent, request } from "node:http";
import { percentile } from "./stats";

export interface LoadOptions {
  /** Loopback only: an `http://127.0.0.1:PORT` base. */
  baseUrl: string;
  method: string;
  path: string;
  /** Requests in flight at once (one keep-alive connection each). */
  concurrency: number;
  /** Stop after this many requests… */
  requests: number;
  /** …or after this long, whichever comes first. */
  maxMs: number;
  /** The body of the i-th request (JSON), if any. */
  body?: (i: number) => string;
}

export interface LoadResult {
  completed: number;
  /** Responses whose status was not 2xx, by status. */
  errors: Record<string, number>;
  elapsedMs: number;
  /** Completed requests per second. */
  throughput: number;
  p50Ms: number;
  p99Ms: number;
}

/**
 * A closed-loop load generator: `concurrency` clients, each sending its next request as soon
 * as its previous one is answered, over keep-alive connections.
 */
export async function runLoad(opts: LoadOptions): Promise<LoadResult> {
  const url = new URL(opts.baseUrl);
  if (url.hostname !== "127.0.0.1")
    throw new Error(`load goes to 127.0.0.1 only, not ${url.hostname}`);
  const agent = new Agent({ keepAlive: true, maxSockets: opts.concurrency });
  const latencies: number[] = [];
  const errors: Record<string, number> = {};
  let issued = 0;
  const started = performance.now();
  const deadline = started + opts.maxMs;

  const send = (i: number) =>
    new Promise<number>((done, fail) => {
      const payload = opts.body?.(i);
      const req = request(
        {
          agent,
          host: url.hostname,
          port: url.port,
          method: opts.method,
          path: opts.path,
          headers:
            payload === undefined
              ? {}
              : {
                  "content-type": "application/json",
                  "content-length": Buffer.byteLength(payload),
                },
        },
        (res) => {
          res.on("data", () => {});
          res.on("end", () => done(res.statusCode ?? 0));
          res.on("error", fail);
        },
      );
      req.on("error", fail);
      req.end(payload);
    });

  const client = async () => {
    while (issued < opts.requests && performance.now() < deadline) {
      const i = issued++;
      const t = performance.now();
      const status = await send(i);
      latencies.push(performance.now() - t);
      if (status < 200 || status > 299) errors[status] = (errors[status] ?? 0) + 1;
    }
  };
  try {
    await Promise.all(Array.from({ length: opts.concurrency }, client));
  } finally {
    agent.destroy();
  }
  const elapsedMs = performance.now() - started;
  return {
    completed: latencies.length,
    errors,
    elapsedMs,
    throughput: (latencies.length * 1000) / elapsedMs,
    p50Ms: percentile(latencies, 50),
    p99Ms: percentile(latencies, 99),
  };
}

/**
 * GETs the paths one after another and returns each one's latency (ms); stops early once
 * `maxMs` has passed (after at least `minCount` requests), so a slow endpoint stays bounded.
 */
export async function sequentialLatencies(
  baseUrl: string,
  paths: readonly string[],
  opts: { maxMs: number; minCount: number } = { maxMs: Number.POSITIVE_INFINITY, minCount: 0 },
): Promise<number[]> {
  const url = new URL(baseUrl);
  if (url.hostname !== "127.0.0.1")
    throw new Error(`requests go to 127.0.0.1 only, not ${url.hostname}`);
  const deadline = performance.now() + opts.maxMs;
  const agent = new Agent({ keepAlive: true, maxSockets: 1 });
  const out: number[] = [];
  try {
    for (const path of paths) {
      if (out.length >= opts.minCount && performance.now() > deadline) break;
      const t = performance.now();
      const status = await new Promise<number>((done, fail) => {
        const req = request(
          { agent, host: url.hostname, port: url.port, method: "GET", path },
          (res) => {
            res.on("data", () => {});
            res.on("end", () => done(res.statusCode ?? 0));
            res.on("error", fail);
          },
        );
        req.on("error", fail);
        req.end();
      });
      out.push(performance.now() - t);
      if (status !== 200) throw new Error(`GET ${path} answered ${status}`);
    }
  } finally {
    agent.destroy();
  }
  return out;
}
