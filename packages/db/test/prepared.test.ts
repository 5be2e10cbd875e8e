import { RunRepository, SqliteRunStore } from "@looprun/db";
import { afterEach, beforeEach, expect, it } from "vitest";
import { freshDatabase, newRun, removeDir } from "./support";

// Engine writes go through statements prepared once per shape (prepared.ts): a null must be
// stored as SQL NULL (not the JSON text "null"), and a value through its column's encoder.

let dir: string;
let database: Awaited<ReturnType<typeof freshDatabase>>["database"];
beforeEach(async () => {
  ({ dir, database } = await freshDatabase());
});
afterEach(async () => {
  database.close();
  await removeDir(dir);
});

it("stores nulls as SQL NULL and JSON values as JSON, whichever shape the patch has", async () => {
  const input = newRun({});
  new RunRepository(database.db).createRun(input);
  const store = new SqliteRunStore(database.db);
  const { run } = (await store.claimRun(input.id))!;
  const partial = { passed: 1, total: 2, failed: ["npm run lint"] };
  const kinds = () =>
    database.sqlite
      .prepare(
        "select typeof(partial) p, typeof(reason) r, partial, progress from runs where id = ?",
      )
      .get(input.id);

  let stored = await store.commit(input.id, run.epoch, { run: { partial, progress: "a" } }, 1);
  expect(stored.partial).toEqual(partial);
  expect(kinds()).toEqual({
    p: "text",
    r: "null",
    partial: JSON.stringify(partial),
    progress: "a",
  });

  // The same keys, now null: another shape, another statement.
  stored = await store.commit(input.id, run.epoch, { run: { partial: null, progress: null } }, 2);
  expect(stored.partial).toBeNull();
  expect(kinds()).toEqual({ p: "null", r: "null", partial: null, progress: null });

  // Back to the first shape: its statement is reused with the new values.
  stored = await store.commit(input.id, run.epoch, { run: { partial, progress: "b" } }, 3);
  expect(kinds()).toMatchObject({ p: "text", progress: "b" });
  expect((await store.getRun(input.id))?.partial).toEqual(partial);
});
