import type { BenchRedis } from "./redis";

/** What every scenario gets from bench/run.ts. */
export interface BenchContext {
  /** `--quick`: fewer repetitions and smaller numbers. */
  quick: boolean;
  /** Repetitions per figure. */
  reps: number;
  /** The bench's own redis-server (each stack uses its own queue prefix on it). */
  redis: BenchRedis;
  log(message: string): void;
}
