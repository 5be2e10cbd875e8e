/**
 * The bare-minimum submit path, for scale: a Hono handler (served by @hono/node-server) that
 * does one insert and one BullMQ `Queue.add`. The insert goes to SQLite (better-sqlite3, WAL,
 * synchronous=FULL, like looprun's API) at DATABASE_PATH, or with DATABASE_URL to PostgreSQL
 * (a `pg` pool of 10, like looprun's default). Configured by PORT, DATABASE_PATH or
 * DATABASE_URL, REDIS_URL and QUEUE_PREFIX; prints "listening" when it takes requests.
 */
import { serve } from "@hono/node-server";
import BetterSqlite3 from "better-sqlite3";
import { Queue } from "bullmq";
import { Hono } from "hono";
import { Redis } from "ioredis";
import pg from "pg";
import { monotonicFactory } from "ulid";

const env = (name: string) => {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is required`);
  return value;
};

const TABLE =
  "create table if not exists runs (id text primary key, session_id text not null, body text not null, created_at bigint not null)";

/** Inserts one row; resolves once it is committed. */
type Insert = (id: string, sessionId: string, body: string, createdAt: number) => Promise<void>;

async function openStore(): Promise<{ insert: Insert; close(): Promise<void> }> {
  const url = process.env.DATABASE_URL;
  if (url) {
    const pool = new pg.Pool({ connectionString: url, max: 10 });
    await pool.query(TABLE);
    return {
      insert: async (...values) => {
        await pool.query(
          "insert into runs (id, session_id, body, created_at) values ($1, $2, $3, $4)",
          values,
        );
      },
      close: () => pool.end(),
    };
  }
  const sqlite = new BetterSqlite3(env("DATABASE_PATH"));
  sqlite.pragma("busy_timeout = 5000");
  sqlite.pragma("journal_mode = WAL");
  sqlite.pragma("synchronous = FULL");
  sqlite.exec(TABLE);
  const statement = sqlite.prepare(
    "insert into runs (id, session_id, body, created_at) values (?, ?, ?, ?)",
  );
  return {
    insert: async (...values) => {
      statement.run(...values);
    },
    close: async () => {
      sqlite.close();
    },
  };
}

const store = await openStore();

// The same connection options as looprun's API queue (fail fast while Redis is down).
const connection = new Redis(env("REDIS_URL"), {
  enableOfflineQueue: false,
  maxRetriesPerRequest: 1,
  connectTimeout: 2000,
});
connection.on("error", () => {});
const queue = new Queue("baseline", { connection, prefix: env("QUEUE_PREFIX") });
const newId = monotonicFactory();

const app = new Hono();
app.post("/api/runs", async (c) => {
  const body = await c.req.json<{ sessionId?: string }>();
  const id = newId();
  const createdAt = Date.now();
  await store.insert(id, body.sessionId ?? id, JSON.stringify(body), createdAt);
  await queue.add("run", { runId: id }, { jobId: id });
  return c.json({ id, status: "queued", createdAt: new Date(createdAt).toISOString() }, 202);
});

await new Promise<void>((ready) => connection.once("ready", () => ready()));
const server = serve({ fetch: app.fetch, hostname: "127.0.0.1", port: Number(env("PORT")) });
server.once("listening", () => process.stdout.write("listening\n"));

const close = () => {
  server.close();
  void queue.close().finally(async () => {
    connection.disconnect();
    await store.close();
    process.exit(0);
  });
};
process.once("SIGTERM", close);
process.once("SIGINT", close);
