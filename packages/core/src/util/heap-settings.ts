import { setFlagsFromString } from "node:v8";

/**
 * The API's and the worker's JavaScript work comes in bursts (a load of submits, a batch of
 * runs), and after one V8 keeps the young generation it grew (~32 MB of semi-spaces) for the
 * life of the process: the worker then held ~1.5× its idle RSS for good, the API ~1.2×
 * (bench/RESULTS.md, memory). With a growth factor of 1 the semi-spaces stay at their initial
 * size — more frequent, cheap minor collections instead. It must be set before the heap
 * grows; `--max-semi-space-size` cannot be changed at run time, this flag can.
 */
export function keepYoungGenerationSmall(): void {
  setFlagsFromString("--semi-space-growth-factor=1");
}
