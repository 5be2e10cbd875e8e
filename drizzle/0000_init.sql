CREATE TABLE `events` (
	`run_id` text NOT NULL,
	`seq` integer NOT NULL,
	`type` text NOT NULL,
	`at` integer NOT NULL,
	`data` text NOT NULL,
	PRIMARY KEY(`run_id`, `seq`),
	FOREIGN KEY (`run_id`) REFERENCES `runs`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE TABLE `iterations` (
	`run_id` text NOT NULL,
	`n` integer NOT NULL,
	`attempt` integer NOT NULL,
	`status` text NOT NULL,
	`outcome` text,
	`prompt` text NOT NULL,
	`agent` text,
	`validation` text NOT NULL,
	`review_id` text,
	`feedback` text,
	`started_at` integer NOT NULL,
	`finished_at` integer,
	PRIMARY KEY(`run_id`, `n`, `attempt`),
	FOREIGN KEY (`run_id`) REFERENCES `runs`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE TABLE `review_artifacts` (
	`id` text PRIMARY KEY NOT NULL,
	`run_id` text NOT NULL,
	`session_id` text NOT NULL,
	`phase` text DEFAULT 'review' NOT NULL,
	`iteration` integer NOT NULL,
	`blocking_issues` text NOT NULL,
	`non_blocking_issues` text NOT NULL,
	`score` real NOT NULL,
	`fix_plan` text NOT NULL,
	`created_at` integer NOT NULL,
	FOREIGN KEY (`run_id`) REFERENCES `runs`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE INDEX `review_artifacts_run_idx` ON `review_artifacts` (`run_id`,`iteration`);--> statement-breakpoint
CREATE TABLE `runs` (
	`id` text PRIMARY KEY NOT NULL,
	`session_id` text NOT NULL,
	`task` text NOT NULL,
	`spec` text NOT NULL,
	`workspace` text NOT NULL,
	`status` text NOT NULL,
	`reason` text,
	`summary` text,
	`iteration` integer DEFAULT 0 NOT NULL,
	`progress` text,
	`metrics` text NOT NULL,
	`consecutive_failures` integer DEFAULT 0 NOT NULL,
	`epoch` integer DEFAULT 0 NOT NULL,
	`latest_review_id` text,
	`created_at` integer NOT NULL,
	`started_at` integer,
	`finished_at` integer,
	`deadline_at` integer,
	`stop_requested_at` integer,
	FOREIGN KEY (`session_id`) REFERENCES `sessions`(`id`) ON UPDATE no action ON DELETE no action
);
--> statement-breakpoint
CREATE UNIQUE INDEX `runs_one_active_per_session` ON `runs` (`session_id`) WHERE status in ('queued', 'running', 'awaiting_approval', 'stopping');--> statement-breakpoint
CREATE INDEX `runs_session_id_idx` ON `runs` (`session_id`,`id`);--> statement-breakpoint
CREATE INDEX `runs_status_id_idx` ON `runs` (`status`,`id`);--> statement-breakpoint
CREATE TABLE `sessions` (
	`id` text PRIMARY KEY NOT NULL,
	`workspace` text NOT NULL,
	`created_at` integer NOT NULL
);
--> statement-breakpoint
CREATE TABLE `tool_calls` (
	`run_id` text NOT NULL,
	`seq` integer NOT NULL,
	`iteration` integer NOT NULL,
	`server` text NOT NULL,
	`tool` text NOT NULL,
	`args` text NOT NULL,
	`is_error` integer NOT NULL,
	`result` text NOT NULL,
	`duration_ms` integer NOT NULL,
	`created_at` integer NOT NULL,
	PRIMARY KEY(`run_id`, `seq`),
	FOREIGN KEY (`run_id`) REFERENCES `runs`(`id`) ON UPDATE no action ON DELETE cascade
);
