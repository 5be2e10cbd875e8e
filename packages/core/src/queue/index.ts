export { RUN_JOB_NAME, RUN_QUEUE, RunJob, runJobOptions, stopChannel } from "./run-job";
