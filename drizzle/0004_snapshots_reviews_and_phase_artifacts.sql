CREATE TABLE `iteration_snapshots` (
	`run_id` text NOT NULL,
	`n` integer NOT NULL,
	`attempt` integer NOT NULL,
	`snapshot_id` text NOT NULL,
	`parent_id` text NOT NULL,
	`diff` text NOT NULL,
	`diff_bytes` integer NOT NULL,
	`diff_truncated` integer NOT NULL,
	`created_at` integer NOT NULL,
	PRIMARY KEY(`run_id`, `n`, `attempt`),
	FOREIGN KEY (`run_id`) REFERENCES `runs`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE TABLE `phase_artifacts` (
	`run_id` text NOT NULL,
	`phase` text NOT NULL,
	`content` text NOT NULL,
	`created_at` integer NOT NULL,
	PRIMARY KEY(`run_id`, `phase`),
	FOREIGN KEY (`run_id`) REFERENCES `runs`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE TABLE `run_changes` (
	`run_id` text PRIMARY KEY NOT NULL,
	`baseline_snapshot` text NOT NULL,
	`head_snapshot` text NOT NULL,
	`iteration` integer NOT NULL,
	`files` text NOT NULL,
	`stat` text NOT NULL,
	`patch` text,
	`patch_bytes` integer NOT NULL,
	`updated_at` integer NOT NULL,
	FOREIGN KEY (`run_id`) REFERENCES `runs`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
ALTER TABLE `runs` ADD `baseline_snapshot` text;--> statement-breakpoint
ALTER TABLE `runs` ADD `latest_snapshot` text;