import type pg from "pg";

/**
 * A deadline for every query of a pool's connections: one that the server has not answered
 * by then ends its connection — the socket is destroyed, so the query (and any queued behind it
 * on that connection) fails as a lost connection does ("Connection terminated: …", which
 * isPgUnavailable counts: the API answers 503), the transaction's ROLLBACK fails at once, and the
 * pool drops the connection instead of handing it out again.
 *
 * Why not node-postgres' `query_timeout`: on its timeout the connection stays open and in use;
 * the query queued behind the stalled one (drizzle's ROLLBACK) is dropped, and drizzle then
 * gives the connection back to the pool inside the open transaction — the next COMMIT on it
 * would commit the failed transaction's writes. A server that is stalled (stopped, paused, a
 * network that drops packets without a reset) keeps its connections and answers nothing: a
 * request would wait as long as the stall.
 *
 * The server learns of the end when it runs again: what it had not begun is not done, and a
 * transaction it was in is rolled back — but a statement (a COMMIT) it had already received
 * is carried out first. A request answered 503 this way may have been applied: a client retries
 * a submit with its Idempotency-Key.
 *
 * Applied to each new connection of the pool before its first query (its set-up's, in the
 * pool's `onConnect`). `armed` says whether deadlines apply now (not while the migrations run:
 * one may wait for another process's migrations, under an advisory lock).
 */
export function withQueryDeadline(
  client: pg.ClientBase,
  deadlineMs: number,
  armed: () => boolean,
): void {
  // Its socket destroyed while the pool has it out, the client emits an error: its queries
  // report it; without a listener it would end the process.
  client.on("error", () => {});
  const query = client.query.bind(client) as (...args: unknown[]) => unknown;
  (client as unknown as { query: (...args: unknown[]) => unknown }).query = (...args) => {
    if (!armed()) return query(...args);
    const timer = setTimeout(() => endStalled(client, deadlineMs), deadlineMs);
    timer.unref();
    const done = () => clearTimeout(timer);
    const last = args.at(-1);
    if (typeof last === "function") {
      // The callback form (pool.query's own): the deadline ends with the callback.
      args[args.length - 1] = (...results: unknown[]) => {
        done();
        return (last as (...r: unknown[]) => unknown)(...results);
      };
      return query(...args);
    }
    const result = query(...args);
    if (result instanceof Promise) result.then(done, done);
    else done(); // a submittable (a cursor, a stream): its own to bound
    return result;
  };
}

function endStalled(client: pg.ClientBase, deadlineMs: number): void {
  const stream = (client as unknown as { connection?: { stream?: { destroy(e?: Error): void } } })
    .connection?.stream;
  stream?.destroy(
    new Error(`Connection terminated: the database did not answer within ${deadlineMs} ms`),
  );
}
