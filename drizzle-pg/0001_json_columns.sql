ALTER TABLE "events" ALTER COLUMN "data" SET DATA TYPE json;--> statement-breakpoint
ALTER TABLE "failure_patterns" ALTER COLUMN "last_errors" SET DATA TYPE json;--> statement-breakpoint
ALTER TABLE "iterations" ALTER COLUMN "agent" SET DATA TYPE json;--> statement-breakpoint
ALTER TABLE "iterations" ALTER COLUMN "validation" SET DATA TYPE json;--> statement-breakpoint
ALTER TABLE "review_artifacts" ALTER COLUMN "blocking_issues" SET DATA TYPE json;--> statement-breakpoint
ALTER TABLE "review_artifacts" ALTER COLUMN "non_blocking_issues" SET DATA TYPE json;--> statement-breakpoint
ALTER TABLE "review_artifacts" ALTER COLUMN "fix_plan" SET DATA TYPE json;--> statement-breakpoint
ALTER TABLE "run_changes" ALTER COLUMN "files" SET DATA TYPE json;--> statement-breakpoint
ALTER TABLE "runs" ALTER COLUMN "spec" SET DATA TYPE json;--> statement-breakpoint
ALTER TABLE "runs" ALTER COLUMN "metrics" SET DATA TYPE json;--> statement-breakpoint
ALTER TABLE "runs" ALTER COLUMN "partial" SET DATA TYPE json;--> statement-breakpoint
ALTER TABLE "runs" ALTER COLUMN "plan" SET DATA TYPE json;--> statement-breakpoint
ALTER TABLE "runs" ALTER COLUMN "approval" SET DATA TYPE json;--> statement-breakpoint
ALTER TABLE "tool_calls" ALTER COLUMN "args" SET DATA TYPE json;