import { defineConfig } from "drizzle-kit";

/** The PostgreSQL store's migrations (`DATABASE_URL=postgres://…`); SQLite's are in drizzle.config.ts. */
export default defineConfig({
  dialect: "postgresql",
  schema: "./packages/db/src/pg/schema.ts",
  out: "./drizzle-pg",
});
