import { existsSync } from "node:fs";
import { collectSnapshotGarbage, SnapshotGcRefused, type SnapshotGcResult } from "@looprun/core";
import { isLooprunDatabaseAt, openStorage, redactUrl } from "@looprun/db";
import { fail } from "../lifecycle";

/** How often a collection over many sessions says how far it is. */
const PROGRESS_EVERY_MS = 1000;

/**
 * `looprun gc`: removes from the snapshot store what no run of the database needs (see
 * collectSnapshotGarbage in @looprun/core) — with the API and the workers stopped. It reads the
 * workers' settings (DATABASE_URL or DATABASE_PATH, LOOPRUN_SNAPSHOTS_DIR), so it finds the
 * database and the store they use.
 */
export async function gcCommand(opts: { dryRun?: boolean; force?: boolean }): Promise<void> {
  const { parseWorkerEnv, snapshotsDirOf } = await import("@looprun/worker");
  const env = parseWorkerEnv(process.env);
  const root = snapshotsDirOf(env);
  if (!existsSync(root)) {
    process.stdout.write(`looprun gc: no snapshot store at ${root}: nothing to collect\n`);
    return;
  }
  // Opening would make a SQLite file that is not there, and looprun's tables in another database.
  const where = {
    ...(env.DATABASE_URL !== undefined ? { url: env.DATABASE_URL } : {}),
    path: env.DATABASE_PATH,
  };
  if (env.DATABASE_URL === undefined && !existsSync(env.DATABASE_PATH)) {
    fail(`gc: no database at ${env.DATABASE_PATH} (DATABASE_PATH): the workers' is needed`);
  }
  if (!(await isLooprunDatabaseAt(where))) {
    const named =
      env.DATABASE_URL === undefined
        ? `${env.DATABASE_PATH} (DATABASE_PATH)`
        : `${redactUrl(env.DATABASE_URL)} (DATABASE_URL)`;
    fail(`gc: ${named} is not a looprun database`);
  }
  const storage = await openStorage({
    ...where,
    applicationName: "looprun-gc",
    maxConnections: 2,
  });
  let result: SnapshotGcResult;
  let lastProgress = Date.now();
  try {
    result = await collectSnapshotGarbage({
      root,
      records: (runIds) => storage.repo.retention.snapshotsOfRuns(runIds),
      ...(opts.dryRun === true ? { dryRun: true } : {}),
      ...(opts.force === true ? { force: true } : {}),
      ...(process.env.PATH !== undefined ? { path: process.env.PATH } : {}),
      onProgress: (done, total) => {
        if (Date.now() - lastProgress < PROGRESS_EVERY_MS) return;
        lastProgress = Date.now();
        process.stderr.write(`looprun gc: read ${done} of ${total} sessions' snapshots\n`);
      },
    });
  } catch (error) {
    if (error instanceof SnapshotGcRefused) fail(`gc refused: ${error.message}`);
    throw error;
  } finally {
    await storage.close();
  }
  process.stdout.write(summary(root, storage.location, result, opts.dryRun === true));
}

function summary(root: string, database: string, r: SnapshotGcResult, dry: boolean): string {
  const mb = (bytes: number) =>
    bytes < 1024 * 1024
      ? `${Math.round(bytes / 1024)} KB`
      : `${(bytes / 1024 / 1024).toFixed(1)} MB`;
  const lines = [
    `looprun gc${dry ? " (dry run: nothing removed)" : ""}: ${root}, runs from ${database}`,
    `  sessions read:   ${r.sessions}`,
    `  refs of runs no longer in the database: ${r.refsOfGoneRuns} ${dry ? "to delete" : "deleted"}`,
    `  loose objects:   ${r.objectsRemoved} ${dry ? "to remove" : "removed"} (${mb(r.bytesRemoved)}), ${r.objectsKept} kept`,
  ];
  if (r.ownObjects.length > 0) {
    lines.push(
      `  left as they are (objects of their own, made by an older looprun): ${r.ownObjects.join(", ")}`,
    );
  }
  return `${lines.join("\n")}\n`;
}
