import type {
  EventRecord,
  IterationRecord,
  IterationSnapshot,
  RunChange,
  RunRecord,
  RunStore,
} from "@looprun/core";
import {
  type NewRun,
  type ReviewArtifactRow,
  RunRepository,
  SqliteRunStore,
  type StopRequest,
  type ToolCallRow,
} from "@looprun/db";
import { isPgUniqueViolation, type PgDatabase, PgRunRepository, PgRunStore } from "@looprun/db/pg";
import { asc, eq } from "drizzle-orm";
import { runChanges as pgChanges, iterationSnapshots as pgSnapshots } from "../src/pg/schema";
import { iterationSnapshots, runChanges } from "../src/schema";
import { freshDatabase, removeDir } from "./support";

/**
 * One engine under the shared store suite (run-store-suite.ts): its RunStore and the reads
 * and writes of the API that the tests set up runs with and check them through.
 */
export interface StoreHarness {
  engine: "sqlite" | "postgres";
  store: RunStore;
  createRun(input: NewRun): Promise<RunRecord>;
  getRun(runId: string): Promise<RunRecord | null>;
  activeRunOf(sessionId: string): Promise<string | null>;
  requestStop(runId: string, now: number): Promise<StopRequest>;
  finalizeStop(runId: string, now: number): Promise<RunRecord | null>;
  listIterations(runId: string): Promise<IterationRecord[]>;
  listEvents(runId: string, after: number, limit: number): Promise<EventRecord[]>;
  listToolCalls(runId: string): Promise<ToolCallRow[]>;
  listReviews(runId: string): Promise<ReviewArtifactRow[]>;
  snapshots(runId: string): Promise<IterationSnapshot[]>;
  change(runId: string): Promise<RunChange | null>;
  /** Whether an error is the engine's unique-constraint violation. */
  isUniqueViolation(error: unknown): boolean;
  close(): Promise<void>;
}

/** A fresh SQLite file (with its migrations) per call. */
export async function sqliteHarness(): Promise<StoreHarness> {
  const { dir, database } = await freshDatabase();
  const repo = new RunRepository(database.db);
  const db = database.db;
  return {
    engine: "sqlite",
    store: new SqliteRunStore(db),
    createRun: async (input) => repo.createRun(input),
    getRun: async (id) => repo.getRun(id),
    activeRunOf: async (id) => repo.activeRunOf(id),
    requestStop: async (id, now) => repo.requestStop(id, now),
    finalizeStop: async (id, now) => repo.finalizeStop(id, now),
    listIterations: async (id) => repo.listIterations(id),
    listEvents: async (id, after, limit) => repo.listEvents(id, after, limit),
    listToolCalls: async (id) => repo.listToolCalls(id),
    listReviews: async (id) => repo.listReviews(id),
    snapshots: async (id) =>
      db
        .select()
        .from(iterationSnapshots)
        .where(eq(iterationSnapshots.runId, id))
        .orderBy(asc(iterationSnapshots.n), asc(iterationSnapshots.attempt))
        .all(),
    change: async (id) =>
      db.select().from(runChanges).where(eq(runChanges.runId, id)).get() ?? null,
    isUniqueViolation: (e) => e instanceof Error && /UNIQUE constraint failed/.test(e.message),
    async close() {
      database.close();
      await removeDir(dir);
    },
  };
}

/** A harness on an open PostgreSQL database (the caller empties it between tests). */
export function pgHarness(database: PgDatabase): StoreHarness {
  const repo = new PgRunRepository(database.db);
  const db = database.db;
  return {
    engine: "postgres",
    store: new PgRunStore(db),
    createRun: (input) => repo.createRun(input),
    getRun: (id) => repo.getRun(id),
    activeRunOf: (id) => repo.activeRunOf(id),
    requestStop: (id, now) => repo.requestStop(id, now),
    finalizeStop: (id, now) => repo.finalizeStop(id, now),
    listIterations: (id) => repo.listIterations(id),
    listEvents: (id, after, limit) => repo.listEvents(id, after, limit),
    listToolCalls: (id) => repo.listToolCalls(id),
    listReviews: (id) => repo.listReviews(id),
    snapshots: (id) =>
      db
        .select()
        .from(pgSnapshots)
        .where(eq(pgSnapshots.runId, id))
        .orderBy(asc(pgSnapshots.n), asc(pgSnapshots.attempt)),
    change: async (id) =>
      (await db.select().from(pgChanges).where(eq(pgChanges.runId, id)))[0] ?? null,
    isUniqueViolation: (e) => isPgUniqueViolation(e),
    close: async () => {},
  };
}
