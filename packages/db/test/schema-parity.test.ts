import type { Column } from "drizzle-orm";
import { PgTable, getTableConfig as pgConfig } from "drizzle-orm/pg-core";
import { SQLiteTable, getTableConfig as sqliteConfig } from "drizzle-orm/sqlite-core";
import { describe, expect, expectTypeOf, it } from "vitest";
import * as pgSchema from "../src/pg/schema";
import * as sqliteSchema from "../src/schema";

/*
 * One schema definition per dialect, kept from drifting apart: the same tables, columns
 * (SQL and TypeScript names), nullability, defaults, keys and indexes on both. The types
 * differ by dialect only as mapped in pg/schema.ts.
 */

const sqliteTables = Object.values(sqliteSchema).filter((t) => t instanceof SQLiteTable);
const pgTables = Object.values(pgSchema).filter((t) => t instanceof PgTable);

/** The value kind a column holds, in terms both dialects share. */
function kind(column: Column): string {
  const sqlType = column.getSQLType();
  if (column.dataType === "custom") return sqlType.startsWith("text") ? "string" : sqlType;
  return column.dataType;
}

function describeColumn(column: Column, key: string) {
  return {
    key,
    name: column.name,
    notNull: column.notNull,
    primary: column.primary,
    hasDefault: column.hasDefault,
    default: column.default,
    kind: kind(column),
  };
}

function columnsOf(table: Record<string, unknown>, columns: Column[]) {
  // The TypeScript property of each column (what the row types are made of).
  const keyOf = new Map(
    Object.entries(table)
      .filter(([, v]) => columns.includes(v as Column))
      .map(([k, v]) => [v as Column, k]),
  );
  return columns
    .map((c) => describeColumn(c, keyOf.get(c) ?? "?"))
    .sort((a, b) => a.name.localeCompare(b.name));
}

function sqliteShape(table: SQLiteTable) {
  const c = sqliteConfig(table);
  return {
    columns: columnsOf(table as unknown as Record<string, unknown>, c.columns),
    primaryKeys: c.primaryKeys.map((pk) => pk.columns.map((col) => col.name)),
    indexes: c.indexes
      .map((i) => ({
        name: i.config.name,
        unique: i.config.unique,
        columns: i.config.columns.map((col) => (col as Column).name),
        partial: i.config.where !== undefined,
      }))
      .sort((a, b) => a.name.localeCompare(b.name)),
    foreignKeys: c.foreignKeys
      .map((fk) => {
        const r = fk.reference();
        return {
          columns: r.columns.map((col) => col.name),
          table: sqliteConfig(r.foreignTable).name,
          foreignColumns: r.foreignColumns.map((col) => col.name),
          onDelete: fk.onDelete ?? "no action",
        };
      })
      .sort((a, b) => a.columns.join().localeCompare(b.columns.join())),
  };
}

function pgShape(table: PgTable) {
  const c = pgConfig(table);
  return {
    columns: columnsOf(table as unknown as Record<string, unknown>, c.columns),
    primaryKeys: c.primaryKeys.map((pk) => pk.columns.map((col) => col.name)),
    indexes: c.indexes
      .map((i) => ({
        name: i.config.name ?? "?",
        unique: i.config.unique,
        columns: i.config.columns.map((col) => (col as Column).name),
        partial: i.config.where !== undefined,
      }))
      .sort((a, b) => a.name.localeCompare(b.name)),
    foreignKeys: c.foreignKeys
      .map((fk) => {
        const r = fk.reference();
        return {
          columns: r.columns.map((col) => col.name),
          table: pgConfig(r.foreignTable).name,
          foreignColumns: r.foreignColumns.map((col) => col.name),
          onDelete: fk.onDelete ?? "no action",
        };
      })
      .sort((a, b) => a.columns.join().localeCompare(b.columns.join())),
  };
}

describe("the SQLite and PostgreSQL schemas", () => {
  it("have the same tables, under the same export names", () => {
    const names = (s: Record<string, unknown>, cls: typeof SQLiteTable | typeof PgTable) =>
      Object.entries(s)
        .filter(([, v]) => v instanceof cls)
        .map(([k]) => k)
        .sort();
    expect(names(pgSchema, PgTable)).toEqual(names(sqliteSchema, SQLiteTable));
    expect(pgTables.map((t) => pgConfig(t).name).sort()).toEqual(
      sqliteTables.map((t) => sqliteConfig(t).name).sort(),
    );
    expect(sqliteTables.length).toBeGreaterThan(0);
  });

  for (const table of sqliteTables) {
    const name = sqliteConfig(table).name;
    it(`define ${name} alike: columns, nullability, defaults, keys, indexes`, () => {
      const twin = pgTables.find((t) => pgConfig(t).name === name);
      expect(twin, `pg/schema.ts has no table ${name}`).toBeDefined();
      expect(pgShape(twin!)).toEqual(sqliteShape(table));
    });
  }

  it("give identical TypeScript row types", () => {
    expectTypeOf<typeof pgSchema.sessions.$inferSelect>().toEqualTypeOf<
      typeof sqliteSchema.sessions.$inferSelect
    >();
    expectTypeOf<typeof pgSchema.runs.$inferSelect>().toEqualTypeOf<
      typeof sqliteSchema.runs.$inferSelect
    >();
    expectTypeOf<typeof pgSchema.runs.$inferInsert>().toEqualTypeOf<
      typeof sqliteSchema.runs.$inferInsert
    >();
    expectTypeOf<typeof pgSchema.iterations.$inferSelect>().toEqualTypeOf<
      typeof sqliteSchema.iterations.$inferSelect
    >();
    expectTypeOf<typeof pgSchema.events.$inferSelect>().toEqualTypeOf<
      typeof sqliteSchema.events.$inferSelect
    >();
    expectTypeOf<typeof pgSchema.toolCalls.$inferSelect>().toEqualTypeOf<
      typeof sqliteSchema.toolCalls.$inferSelect
    >();
    expectTypeOf<typeof pgSchema.reviewArtifacts.$inferSelect>().toEqualTypeOf<
      typeof sqliteSchema.reviewArtifacts.$inferSelect
    >();
    expectTypeOf<typeof pgSchema.iterationSnapshots.$inferSelect>().toEqualTypeOf<
      typeof sqliteSchema.iterationSnapshots.$inferSelect
    >();
    expectTypeOf<typeof pgSchema.runChanges.$inferSelect>().toEqualTypeOf<
      typeof sqliteSchema.runChanges.$inferSelect
    >();
    expectTypeOf<typeof pgSchema.phaseArtifacts.$inferSelect>().toEqualTypeOf<
      typeof sqliteSchema.phaseArtifacts.$inferSelect
    >();
    expectTypeOf<typeof pgSchema.idempotencyKeys.$inferSelect>().toEqualTypeOf<
      typeof sqliteSchema.idempotencyKeys.$inferSelect
    >();
    expectTypeOf<typeof pgSchema.failurePatterns.$inferSelect>().toEqualTypeOf<
      typeof sqliteSchema.failurePatterns.$inferSelect
    >();
    expectTypeOf<typeof pgSchema.runStatsHourly.$inferSelect>().toEqualTypeOf<
      typeof sqliteSchema.runStatsHourly.$inferSelect
    >();
    expectTypeOf<typeof pgSchema.iterationStatsHourly.$inferSelect>().toEqualTypeOf<
      typeof sqliteSchema.iterationStatsHourly.$inferSelect
    >();
    expectTypeOf<typeof pgSchema.toolStatsHourly.$inferSelect>().toEqualTypeOf<
      typeof sqliteSchema.toolStatsHourly.$inferSelect
    >();
    expectTypeOf<typeof pgSchema.toolErrorsHourly.$inferSelect>().toEqualTypeOf<
      typeof sqliteSchema.toolErrorsHourly.$inferSelect
    >();
  });

  it("compare the partial index's condition literally", () => {
    const where = (cfg: { indexes: { config: { name?: string; where?: unknown } }[] }) =>
      JSON.stringify(
        (
          cfg.indexes.find((i) => i.config.name === "runs_one_active_per_session")?.config.where as
            | { queryChunks?: unknown }
            | undefined
        )?.queryChunks,
      );
    expect(where(pgConfig(pgSchema.runs))).toContain("awaiting_approval");
    expect(where(pgConfig(pgSchema.runs))).toEqual(where(sqliteConfig(sqliteSchema.runs)));
  });
});
