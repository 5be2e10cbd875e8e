import { dashboardOperations } from "./dashboard-operations";
import type { OperationDoc } from "./operation-doc";
import { RUN_OPERATIONS } from "./run-operations";
import { SERVICE_OPERATIONS } from "./service-operations";

export { NAMED, type OperationDoc, REQUEST_BODIES, type ResponseDoc } from "./operation-doc";

/** Every route of the app. A test checks this list against the routes the app registers. */
export const OPERATIONS: OperationDoc[] = [
  ...RUN_OPERATIONS,
  ...SERVICE_OPERATIONS,
  ...dashboardOperations(),
];
