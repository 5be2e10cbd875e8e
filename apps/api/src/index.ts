export { createApp } from "./app";
export type { AppDeps } from "./app-deps";
export { ApiEnv, parseApiEnv } from "./env";
export type { RunQueue } from "./run-queue";
export { createRunQueue } from "./run-queue";
export type { ApiServer } from "./server";
export { startApi } from "./server";
