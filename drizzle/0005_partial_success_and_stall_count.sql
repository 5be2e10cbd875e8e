ALTER TABLE `runs` ADD `stalled_iterations` integer DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE `runs` ADD `partial` text;