CREATE TABLE `failure_patterns` (
	`scope` text NOT NULL,
	`workspace` text NOT NULL,
	`subject` text NOT NULL,
	`shape` text NOT NULL,
	`successes` integer DEFAULT 0 NOT NULL,
	`failures` integer DEFAULT 0 NOT NULL,
	`total_duration_ms` integer DEFAULT 0 NOT NULL,
	`last_errors` text NOT NULL,
	`last_run_id` text,
	`last_seen_at` integer NOT NULL,
	PRIMARY KEY(`scope`, `workspace`, `subject`, `shape`)
);
--> statement-breakpoint
CREATE INDEX `failure_patterns_workspace_idx` ON `failure_patterns` (`workspace`,`scope`);--> statement-breakpoint
ALTER TABLE `runs` ADD `approval` text;--> statement-breakpoint
ALTER TABLE `runs` ADD `paused_ms` integer DEFAULT 0 NOT NULL;