import { setFlagsFromString } from "node:v8";

/**
 * A worker's JavaScript work is small next to the commands it waits for, yet after a burst of
 * runs V8 keeps the young generation it grew (~32 MB of semi-spaces) for the life of the
 * process: the worker then held ~1.5× its idle RSS for good (bench/RESULTS.md, memory). With a
 * growth factor of 1 the semi-spaces stay at their initial size — more frequent, cheap minor
 * collections instead. It must be set before the heap grows; `--max-semi-space-size` cannot
 * be changed at run time, this flag can.
 */
export function keepYoungGenerationSmall(): void {
  setFlagsFromString("--semi-space-growth-factor=1");
}
