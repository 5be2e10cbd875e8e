import { createHash } from "node:crypto";
import type BetterSqlite3 from "better-sqlite3";

/** How long an `Idempotency-Key` is remembered (its run then kept at least as long). */
export const IDEMPOTENCY_TTL_MS = 24 * 3_600_000;

/**
 * An `Idempotency-Key` as it is stored: its SHA-256 (hex). A client may use anything as its
 * key, a token included: the database never holds it as written.
 */
export function idempotencyKeyHash(key: string): string {
  return createHash("sha256").update(key).digest("hex");
}

/** Whether a stored key is a hash (every key stored since keys were hashed is). */
export const isKeyHash = (key: string) => /^[0-9a-f]{64}$/.test(key);

/**
 * The keys a version before hashing stored as written, stored as hashes — at start-up, after
 * the migrations: a client's retry with such a key (within its 24 hours) found no run, and got
 * a second one. Where the retry came first (a row of the hash already there), the old row goes.
 * A key sent as 64 lowercase hex digits is taken for a hash (as it is stored now).
 */
export function rehashLegacyKeys(
  keys: readonly string[],
  write: (legacy: string, hash: string) => void,
): void {
  for (const key of keys) if (!isKeyHash(key)) write(key, idempotencyKeyHash(key));
}

/** rehashLegacyKeys on SQLite, in one transaction (processes opening the file at once agree). */
export function rehashLegacySqliteKeys(sqlite: BetterSqlite3.Database): void {
  const legacy = sqlite
    .prepare("select key from idempotency_keys where length(key) <> 64 or key glob '*[^0-9a-f]*'")
    .pluck()
    .all() as string[];
  if (legacy.length === 0) return;
  const taken = sqlite.prepare("select 1 from idempotency_keys where key = ?").pluck();
  const remove = sqlite.prepare("delete from idempotency_keys where key = ?");
  const rename = sqlite.prepare("update idempotency_keys set key = ? where key = ?");
  sqlite
    .transaction(() =>
      rehashLegacyKeys(legacy, (key, hash) => {
        if (taken.get(hash) !== undefined) remove.run(key);
        else rename.run(hash, key);
      }),
    )
    .immediate();
}
