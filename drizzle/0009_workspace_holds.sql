CREATE TABLE `workspace_holds` (
	`workspace` text PRIMARY KEY NOT NULL,
	`run_id` text NOT NULL,
	`expires_at` integer NOT NULL
);
