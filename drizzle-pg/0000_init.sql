CREATE TABLE "events" (
	"run_id" text NOT NULL,
	"seq" integer NOT NULL,
	"type" text NOT NULL,
	"at" bigint NOT NULL,
	"data" jsonb NOT NULL,
	CONSTRAINT "events_run_id_seq_pk" PRIMARY KEY("run_id","seq")
);
--> statement-breakpoint
CREATE TABLE "failure_patterns" (
	"scope" text NOT NULL,
	"workspace" text NOT NULL,
	"subject" text NOT NULL,
	"shape" text NOT NULL,
	"successes" integer DEFAULT 0 NOT NULL,
	"failures" integer DEFAULT 0 NOT NULL,
	"total_duration_ms" bigint DEFAULT 0 NOT NULL,
	"last_errors" jsonb NOT NULL,
	"last_run_id" text,
	"last_seen_at" bigint NOT NULL,
	CONSTRAINT "failure_patterns_scope_workspace_subject_shape_pk" PRIMARY KEY("scope","workspace","subject","shape")
);
--> statement-breakpoint
CREATE TABLE "idempotency_keys" (
	"key" text PRIMARY KEY NOT NULL,
	"request_hash" text NOT NULL,
	"run_id" text NOT NULL,
	"created_at" bigint NOT NULL
);
--> statement-breakpoint
CREATE TABLE "iteration_snapshots" (
	"run_id" text NOT NULL,
	"n" integer NOT NULL,
	"attempt" integer NOT NULL,
	"snapshot_id" text NOT NULL,
	"parent_id" text NOT NULL,
	"diff" text NOT NULL,
	"diff_bytes" bigint NOT NULL,
	"diff_truncated" boolean NOT NULL,
	"created_at" bigint NOT NULL,
	CONSTRAINT "iteration_snapshots_run_id_n_attempt_pk" PRIMARY KEY("run_id","n","attempt")
);
--> statement-breakpoint
CREATE TABLE "iteration_stats_hourly" (
	"hour" integer NOT NULL,
	"outcome" text NOT NULL,
	"iterations" integer NOT NULL,
	"duration_ms" bigint NOT NULL,
	"timed" integer NOT NULL,
	CONSTRAINT "iteration_stats_hourly_hour_outcome_pk" PRIMARY KEY("hour","outcome")
);
--> statement-breakpoint
CREATE TABLE "iterations" (
	"run_id" text NOT NULL,
	"n" integer NOT NULL,
	"attempt" integer NOT NULL,
	"status" text NOT NULL,
	"outcome" text,
	"prompt" text NOT NULL,
	"agent" jsonb,
	"validation" jsonb NOT NULL,
	"review_id" text,
	"feedback" text,
	"started_at" bigint NOT NULL,
	"finished_at" bigint,
	CONSTRAINT "iterations_run_id_n_attempt_pk" PRIMARY KEY("run_id","n","attempt")
);
--> statement-breakpoint
CREATE TABLE "phase_artifacts" (
	"run_id" text NOT NULL,
	"phase" text NOT NULL,
	"content" text NOT NULL,
	"created_at" bigint NOT NULL,
	CONSTRAINT "phase_artifacts_run_id_phase_pk" PRIMARY KEY("run_id","phase")
);
--> statement-breakpoint
CREATE TABLE "review_artifacts" (
	"id" text PRIMARY KEY NOT NULL,
	"run_id" text NOT NULL,
	"session_id" text NOT NULL,
	"phase" text DEFAULT 'review' NOT NULL,
	"iteration" integer NOT NULL,
	"blocking_issues" jsonb NOT NULL,
	"non_blocking_issues" jsonb NOT NULL,
	"score" double precision NOT NULL,
	"fix_plan" jsonb NOT NULL,
	"created_at" bigint NOT NULL
);
--> statement-breakpoint
CREATE TABLE "run_changes" (
	"run_id" text PRIMARY KEY NOT NULL,
	"baseline_snapshot" text NOT NULL,
	"head_snapshot" text NOT NULL,
	"iteration" integer NOT NULL,
	"files" jsonb NOT NULL,
	"stat" text NOT NULL,
	"patch" text,
	"patch_bytes" bigint NOT NULL,
	"updated_at" bigint NOT NULL
);
--> statement-breakpoint
CREATE TABLE "run_stats_hourly" (
	"hour" integer NOT NULL,
	"status" text NOT NULL,
	"reason" text NOT NULL,
	"runs" integer NOT NULL,
	"iterations" integer NOT NULL,
	"iterations_runs" integer NOT NULL,
	"validation_failures" integer NOT NULL,
	"review_blockings" integer NOT NULL,
	"duration_ms" bigint NOT NULL,
	"duration_runs" integer NOT NULL,
	CONSTRAINT "run_stats_hourly_hour_status_reason_pk" PRIMARY KEY("hour","status","reason")
);
--> statement-breakpoint
CREATE TABLE "runs" (
	"id" text COLLATE "C" PRIMARY KEY NOT NULL,
	"session_id" text NOT NULL,
	"task" text NOT NULL,
	"spec" jsonb NOT NULL,
	"workspace" text NOT NULL,
	"status" text NOT NULL,
	"reason" text,
	"summary" text,
	"iteration" integer DEFAULT 0 NOT NULL,
	"progress" text,
	"metrics" jsonb NOT NULL,
	"consecutive_failures" integer DEFAULT 0 NOT NULL,
	"stalled_iterations" integer DEFAULT 0 NOT NULL,
	"partial" jsonb,
	"epoch" integer DEFAULT 0 NOT NULL,
	"latest_review_id" text,
	"baseline_snapshot" text,
	"latest_snapshot" text,
	"plan" jsonb,
	"active_pgid" integer,
	"approval" jsonb,
	"paused_ms" bigint DEFAULT 0 NOT NULL,
	"created_at" bigint NOT NULL,
	"started_at" bigint,
	"finished_at" bigint,
	"deadline_at" bigint,
	"stop_requested_at" bigint
);
--> statement-breakpoint
CREATE TABLE "sessions" (
	"id" text PRIMARY KEY NOT NULL,
	"workspace" text NOT NULL,
	"created_at" bigint NOT NULL
);
--> statement-breakpoint
CREATE TABLE "tool_calls" (
	"run_id" text NOT NULL,
	"seq" integer NOT NULL,
	"iteration" integer NOT NULL,
	"server" text NOT NULL,
	"tool" text NOT NULL,
	"args" jsonb NOT NULL,
	"is_error" boolean NOT NULL,
	"result" text NOT NULL,
	"duration_ms" bigint NOT NULL,
	"created_at" bigint NOT NULL,
	CONSTRAINT "tool_calls_run_id_seq_pk" PRIMARY KEY("run_id","seq")
);
--> statement-breakpoint
CREATE TABLE "tool_errors_hourly" (
	"hour" integer NOT NULL,
	"server" text NOT NULL,
	"tool" text NOT NULL,
	"error" text NOT NULL,
	"count" integer NOT NULL,
	CONSTRAINT "tool_errors_hourly_hour_server_tool_error_pk" PRIMARY KEY("hour","server","tool","error")
);
--> statement-breakpoint
CREATE TABLE "tool_stats_hourly" (
	"hour" integer NOT NULL,
	"server" text NOT NULL,
	"tool" text NOT NULL,
	"calls" integer NOT NULL,
	"failures" integer NOT NULL,
	"duration_ms" bigint NOT NULL,
	CONSTRAINT "tool_stats_hourly_hour_server_tool_pk" PRIMARY KEY("hour","server","tool")
);
--> statement-breakpoint
ALTER TABLE "events" ADD CONSTRAINT "events_run_id_runs_id_fk" FOREIGN KEY ("run_id") REFERENCES "public"."runs"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "idempotency_keys" ADD CONSTRAINT "idempotency_keys_run_id_runs_id_fk" FOREIGN KEY ("run_id") REFERENCES "public"."runs"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "iteration_snapshots" ADD CONSTRAINT "iteration_snapshots_run_id_runs_id_fk" FOREIGN KEY ("run_id") REFERENCES "public"."runs"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "iterations" ADD CONSTRAINT "iterations_run_id_runs_id_fk" FOREIGN KEY ("run_id") REFERENCES "public"."runs"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "phase_artifacts" ADD CONSTRAINT "phase_artifacts_run_id_runs_id_fk" FOREIGN KEY ("run_id") REFERENCES "public"."runs"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "review_artifacts" ADD CONSTRAINT "review_artifacts_run_id_runs_id_fk" FOREIGN KEY ("run_id") REFERENCES "public"."runs"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "run_changes" ADD CONSTRAINT "run_changes_run_id_runs_id_fk" FOREIGN KEY ("run_id") REFERENCES "public"."runs"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "runs" ADD CONSTRAINT "runs_session_id_sessions_id_fk" FOREIGN KEY ("session_id") REFERENCES "public"."sessions"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "tool_calls" ADD CONSTRAINT "tool_calls_run_id_runs_id_fk" FOREIGN KEY ("run_id") REFERENCES "public"."runs"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "failure_patterns_workspace_idx" ON "failure_patterns" USING btree ("workspace","scope");--> statement-breakpoint
CREATE INDEX "review_artifacts_run_idx" ON "review_artifacts" USING btree ("run_id","iteration");--> statement-breakpoint
CREATE UNIQUE INDEX "runs_one_active_per_session" ON "runs" USING btree ("session_id") WHERE status in ('queued', 'running', 'awaiting_approval', 'stopping');--> statement-breakpoint
CREATE INDEX "runs_session_id_idx" ON "runs" USING btree ("session_id","id");--> statement-breakpoint
CREATE INDEX "runs_status_id_idx" ON "runs" USING btree ("status","id");--> statement-breakpoint
CREATE INDEX "runs_created_at_idx" ON "runs" USING btree ("created_at");--> statement-breakpoint
CREATE INDEX "tool_calls_failures_idx" ON "tool_calls" USING btree ("run_id","is_error");--> statement-breakpoint
CREATE INDEX "tool_calls_created_at_idx" ON "tool_calls" USING btree ("created_at");