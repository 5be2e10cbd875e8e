-- Every column holding a run id gets runs.id's byte-order collation (schema.ts,
-- byteOrderedText): a comparison across two collations, as in the statistics functions'
-- `i.run_id = r.id` or a join of runs with iterations, can use no index — each finished run
-- scanned every iteration and tool call stored (loading 100,000 runs slowed down
-- quadratically). The update triggers naming run_id are set aside while the type changes.
DROP TRIGGER iteration_stats_hourly_update ON iterations;--> statement-breakpoint
DROP TRIGGER tool_stats_hourly_update ON tool_calls;--> statement-breakpoint
ALTER TABLE "events" ALTER COLUMN "run_id" SET DATA TYPE text COLLATE "C";--> statement-breakpoint
ALTER TABLE "failure_patterns" ALTER COLUMN "last_run_id" SET DATA TYPE text COLLATE "C";--> statement-breakpoint
ALTER TABLE "idempotency_keys" ALTER COLUMN "run_id" SET DATA TYPE text COLLATE "C";--> statement-breakpoint
ALTER TABLE "iteration_snapshots" ALTER COLUMN "run_id" SET DATA TYPE text COLLATE "C";--> statement-breakpoint
ALTER TABLE "iterations" ALTER COLUMN "run_id" SET DATA TYPE text COLLATE "C";--> statement-breakpoint
ALTER TABLE "phase_artifacts" ALTER COLUMN "run_id" SET DATA TYPE text COLLATE "C";--> statement-breakpoint
ALTER TABLE "review_artifacts" ALTER COLUMN "run_id" SET DATA TYPE text COLLATE "C";--> statement-breakpoint
ALTER TABLE "run_changes" ALTER COLUMN "run_id" SET DATA TYPE text COLLATE "C";--> statement-breakpoint
ALTER TABLE "tool_calls" ALTER COLUMN "run_id" SET DATA TYPE text COLLATE "C";--> statement-breakpoint
ALTER TABLE "workspace_holds" ALTER COLUMN "run_id" SET DATA TYPE text COLLATE "C";
--> statement-breakpoint
CREATE TRIGGER iteration_stats_hourly_update
  AFTER UPDATE OF run_id, status, outcome, started_at, finished_at ON iterations
  FOR EACH ROW WHEN (
    (OLD.status IN ('passed', 'failed') OR NEW.status IN ('passed', 'failed'))
    AND (OLD.run_id, OLD.status, OLD.outcome, OLD.started_at, OLD.finished_at)
      IS DISTINCT FROM (NEW.run_id, NEW.status, NEW.outcome, NEW.started_at, NEW.finished_at))
  EXECUTE FUNCTION looprun_iterations_stats();
--> statement-breakpoint
CREATE TRIGGER tool_stats_hourly_update
  AFTER UPDATE OF run_id, server, tool, is_error, result, duration_ms, created_at ON tool_calls
  FOR EACH ROW WHEN (
    (OLD.run_id, OLD.server, OLD.tool, OLD.is_error, OLD.result, OLD.duration_ms, OLD.created_at)
      IS DISTINCT FROM (NEW.run_id, NEW.server, NEW.tool, NEW.is_error, NEW.result, NEW.duration_ms, NEW.created_at))
  EXECUTE FUNCTION looprun_tool_calls_stats();
