export { MemoryRunStore } from "./memory-run-store";
