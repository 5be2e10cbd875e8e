import type {} from "vitest";
import type { TestProject } from "vitest/node";
import { startRedis } from "./redis-server";

declare module "vitest" {
  export interface ProvidedContext {
    redisUrl: string;
  }
}

/** One redis-server for the whole test run; each test file uses its own queue prefix. */
export default async function setup(project: TestProject) {
  const redis = await startRedis();
  project.provide("redisUrl", redis.url);
  return async () => {
    await redis.stop();
  };
}
