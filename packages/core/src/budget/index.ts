export type { BudgetCheck, RunBudgetView } from "./budget";
export { budgetSnapshot, budgetView, checkBudget, deadlineFor } from "./budget";
