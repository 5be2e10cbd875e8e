CREATE TABLE `iteration_stats_hourly` (
	`hour` integer NOT NULL,
	`outcome` text NOT NULL,
	`iterations` integer NOT NULL,
	`duration_ms` integer NOT NULL,
	`timed` integer NOT NULL,
	PRIMARY KEY(`hour`, `outcome`)
);
--> statement-breakpoint
CREATE TABLE `run_stats_hourly` (
	`hour` integer NOT NULL,
	`status` text NOT NULL,
	`reason` text NOT NULL,
	`runs` integer NOT NULL,
	`iterations` integer NOT NULL,
	`iterations_runs` integer NOT NULL,
	`validation_failures` integer NOT NULL,
	`review_blockings` integer NOT NULL,
	`duration_ms` integer NOT NULL,
	`duration_runs` integer NOT NULL,
	PRIMARY KEY(`hour`, `status`, `reason`)
);
--> statement-breakpoint
CREATE TABLE `tool_errors_hourly` (
	`hour` integer NOT NULL,
	`server` text NOT NULL,
	`tool` text NOT NULL,
	`error` text NOT NULL,
	`count` integer NOT NULL,
	PRIMARY KEY(`hour`, `server`, `tool`, `error`)
);
--> statement-breakpoint
CREATE TABLE `tool_stats_hourly` (
	`hour` integer NOT NULL,
	`server` text NOT NULL,
	`tool` text NOT NULL,
	`calls` integer NOT NULL,
	`failures` integer NOT NULL,
	`duration_ms` integer NOT NULL,
	PRIMARY KEY(`hour`, `server`, `tool`)
);
--> statement-breakpoint
CREATE INDEX `runs_created_at_idx` ON `runs` (`created_at`);--> statement-breakpoint
CREATE INDEX `tool_calls_created_at_idx` ON `tool_calls` (`created_at`);