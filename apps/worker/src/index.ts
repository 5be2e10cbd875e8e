export { parseWorkerEnv, snapshotsDirOf, WorkerEnv } from "./env";
export type { RunWorker } from "./run-worker";
export { startWorker } from "./run-worker";
