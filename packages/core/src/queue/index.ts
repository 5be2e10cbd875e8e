export { RUN_QUEUE, RunJob } from "./run-job";
