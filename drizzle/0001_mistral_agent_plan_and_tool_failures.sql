ALTER TABLE `runs` ADD `plan` text;--> statement-breakpoint
CREATE INDEX `tool_calls_failures_idx` ON `tool_calls` (`run_id`,`is_error`);