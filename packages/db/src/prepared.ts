import type BetterSqlite3 from "better-sqlite3";
import { type Placeholder, type SQL, sql } from "drizzle-orm";
import type { Db } from "./connection";

/**
 * Statements prepared once per connection. On the hot paths (a submit, every engine write)
 * building a query with drizzle and having SQLite compile it cost more than running it:
 * profiled, most of a commit's CPU time went to `prepare` and query building.
 */

/** drizzle(client) keeps the better-sqlite3 handle as `$client`; its type leaves it out. */
export function sqliteClient(db: Db): BetterSqlite3.Database {
  return (db as unknown as { $client: BetterSqlite3.Database }).$client;
}

const byConnection = new WeakMap<Db, Map<unknown, unknown>>();

/** `factory(db)`, made once per connection (and per factory) and kept. */
export function preparedOnce<T>(db: Db, factory: (db: Db) => T): T {
  let cache = byConnection.get(db);
  if (!cache) {
    cache = new Map();
    byConnection.set(db, cache);
  }
  let made = cache.get(factory) as T | undefined;
  if (made === undefined) {
    made = factory(db);
    cache.set(factory, made);
  }
  return made;
}

/**
 * Writes whose set of columns varies from call to call (a run patch, an iteration patch):
 * one statement per shape, prepared when first seen. A shape is the keys written and which
 * of them are null — null is written as the SQL literal, because a placeholder's value goes
 * through the column's encoder, which would store a JSON column's null as the text "null".
 */
export class ShapedStatements<S> {
  private readonly byShape = new Map<string, S>();

  constructor(
    /** Gets the set: a placeholder per key (drizzle encodes its value as the column's), or NULL. */
    private readonly build: (set: Record<string, SQL | Placeholder>) => S,
    /** @defaultValue 256 — shapes kept; a new one past it starts the cache again */
    private readonly max = 256,
  ) {}

  /** The statement for these values, and the placeholder values to run it with. */
  for(row: object): { statement: S; params: Record<string, unknown> } {
    // Any record of column values: a patch's interface type as well as an index signature.
    const values = row as Record<string, unknown>;
    const keys = Object.keys(values)
      .filter((k) => values[k] !== undefined)
      .sort();
    const shape = keys.map((k) => (values[k] === null ? `${k}=null` : k)).join(",");
    let statement = this.byShape.get(shape);
    if (statement === undefined) {
      if (this.byShape.size >= this.max) this.byShape.clear();
      const set: Record<string, SQL | Placeholder> = {};
      for (const k of keys) set[k] = values[k] === null ? sql`null` : sql.placeholder(k);
      statement = this.build(set);
      this.byShape.set(shape, statement);
    }
    const params: Record<string, unknown> = {};
    for (const k of keys) if (values[k] !== null) params[k] = values[k];
    return { statement, params };
  }
}
