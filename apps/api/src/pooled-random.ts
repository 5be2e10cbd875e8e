import { randomFillSync } from "node:crypto";

const pool = new Uint8Array(4096);
let next = pool.length;

/**
 * A PRNG for ulid (a float in [0, 1), 256 steps: ulid draws one of 32 characters from it, so
 * each stays uniform) from the same CSPRNG, drawn 4 KiB at a time: ulid's default asks
 * `crypto.getRandomValues` for one byte per character, 16 calls per id.
 */
export function pooledRandom(): number {
  if (next >= pool.length) {
    randomFillSync(pool);
    next = 0;
  }
  return (pool[next++] as number) / 256;
}
