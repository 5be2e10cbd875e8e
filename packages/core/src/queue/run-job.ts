import { z } from "zod";

/** The BullMQ queue that carries runs. */
export const RUN_QUEUE = "looprun-runs";

/** The one job name: drive the run with this id one step further. Job id = run id. */
export const RunJob = z.object({ runId: z.string().min(1) });
export type RunJob = z.infer<typeof RunJob>;
