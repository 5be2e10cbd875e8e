import { afterAll, afterEach, beforeAll, beforeEach } from "vitest";

/**
 * A resource for the tests of the calling describe block (or file, at its top level): `make`
 * runs before them — once, or before each test with `each` — and `close` after them (after the
 * `afterAll`/`afterEach` hooks registered later: vitest runs those last-first). The object
 * returned reads through to the resource of the moment. `timeoutMs`: the hooks' own, instead
 * of the config's (a resource slow to make, such as a PostgreSQL cluster).
 */
export function useFixture<T extends object>(
  what: string,
  make: () => Promise<T>,
  close: (value: T) => Promise<unknown>,
  { each = false, timeoutMs }: { each?: boolean; timeoutMs?: number } = {},
): T {
  let current: T | undefined;
  (each ? beforeEach : beforeAll)(async () => {
    current = await make();
  }, timeoutMs);
  (each ? afterEach : afterAll)(async () => {
    if (current !== undefined) await close(current);
    current = undefined;
  }, timeoutMs);
  return new Proxy({} as T, {
    get(_, key) {
      if (current === undefined) throw new Error(`${what} is used outside its tests`);
      return Reflect.get(current, key);
    },
  });
}
