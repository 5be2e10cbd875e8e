CREATE TABLE IF NOT EXISTS `iteration_stats_daily` (
	`day` integer NOT NULL,
	`outcome` text NOT NULL,
	`iterations` integer NOT NULL,
	`duration_ms` integer NOT NULL,
	`timed` integer NOT NULL,
	PRIMARY KEY(`day`, `outcome`)
);
--> statement-breakpoint
CREATE TABLE IF NOT EXISTS `run_stats_daily` (
	`day` integer NOT NULL,
	`status` text NOT NULL,
	`reason` text NOT NULL,
	`runs` integer NOT NULL,
	`iterations` integer NOT NULL,
	`iterations_runs` integer NOT NULL,
	`validation_failures` integer NOT NULL,
	`review_blockings` integer NOT NULL,
	`duration_ms` integer NOT NULL,
	`duration_runs` integer NOT NULL,
	PRIMARY KEY(`day`, `status`, `reason`)
);
--> statement-breakpoint
CREATE TABLE IF NOT EXISTS `tool_errors_daily` (
	`day` integer NOT NULL,
	`server` text NOT NULL,
	`tool` text NOT NULL,
	`error` text NOT NULL,
	`count` integer NOT NULL,
	PRIMARY KEY(`day`, `server`, `tool`, `error`)
);
--> statement-breakpoint
CREATE TABLE IF NOT EXISTS `tool_stats_daily` (
	`day` integer NOT NULL,
	`server` text NOT NULL,
	`tool` text NOT NULL,
	`calls` integer NOT NULL,
	`failures` integer NOT NULL,
	`duration_ms` integer NOT NULL,
	PRIMARY KEY(`day`, `server`, `tool`)
);
--> statement-breakpoint
-- Every change of an hourly row (an insert, the update of an upsert, a delete) is carried into
-- its day's row in the same transaction, whatever trigger or statement made it. A day's count
-- comes back to 0 only when its hours' do, and an hour whose count is 0 is deleted (0008's
-- triggers): the day is deleted then, by the trigger of that delete.
CREATE TRIGGER IF NOT EXISTS run_stats_daily_insert AFTER INSERT ON run_stats_hourly BEGIN
  INSERT INTO run_stats_daily (day, status, reason, runs, iterations, iterations_runs, validation_failures, review_blockings, duration_ms, duration_runs)
    VALUES (new.hour / 24, new.status, new.reason, new.runs, new.iterations, new.iterations_runs, new.validation_failures, new.review_blockings, new.duration_ms, new.duration_runs)
    ON CONFLICT (day, status, reason) DO UPDATE SET runs = runs + excluded.runs, iterations = iterations + excluded.iterations, iterations_runs = iterations_runs + excluded.iterations_runs, validation_failures = validation_failures + excluded.validation_failures, review_blockings = review_blockings + excluded.review_blockings, duration_ms = duration_ms + excluded.duration_ms, duration_runs = duration_runs + excluded.duration_runs;
END;
--> statement-breakpoint
CREATE TRIGGER IF NOT EXISTS run_stats_daily_update AFTER UPDATE ON run_stats_hourly BEGIN
  INSERT INTO run_stats_daily (day, status, reason, runs, iterations, iterations_runs, validation_failures, review_blockings, duration_ms, duration_runs)
    VALUES (new.hour / 24, new.status, new.reason, new.runs - old.runs, new.iterations - old.iterations, new.iterations_runs - old.iterations_runs, new.validation_failures - old.validation_failures, new.review_blockings - old.review_blockings, new.duration_ms - old.duration_ms, new.duration_runs - old.duration_runs)
    ON CONFLICT (day, status, reason) DO UPDATE SET runs = runs + excluded.runs, iterations = iterations + excluded.iterations, iterations_runs = iterations_runs + excluded.iterations_runs, validation_failures = validation_failures + excluded.validation_failures, review_blockings = review_blockings + excluded.review_blockings, duration_ms = duration_ms + excluded.duration_ms, duration_runs = duration_runs + excluded.duration_runs;
END;
--> statement-breakpoint
CREATE TRIGGER IF NOT EXISTS run_stats_daily_delete AFTER DELETE ON run_stats_hourly BEGIN
  INSERT INTO run_stats_daily (day, status, reason, runs, iterations, iterations_runs, validation_failures, review_blockings, duration_ms, duration_runs)
    VALUES (old.hour / 24, old.status, old.reason, -old.runs, -old.iterations, -old.iterations_runs, -old.validation_failures, -old.review_blockings, -old.duration_ms, -old.duration_runs)
    ON CONFLICT (day, status, reason) DO UPDATE SET runs = runs + excluded.runs, iterations = iterations + excluded.iterations, iterations_runs = iterations_runs + excluded.iterations_runs, validation_failures = validation_failures + excluded.validation_failures, review_blockings = review_blockings + excluded.review_blockings, duration_ms = duration_ms + excluded.duration_ms, duration_runs = duration_runs + excluded.duration_runs;
  DELETE FROM run_stats_daily
    WHERE day = old.hour / 24 AND status = old.status AND reason = old.reason AND runs = 0;
END;
--> statement-breakpoint
CREATE TRIGGER IF NOT EXISTS iteration_stats_daily_insert AFTER INSERT ON iteration_stats_hourly BEGIN
  INSERT INTO iteration_stats_daily (day, outcome, iterations, duration_ms, timed)
    VALUES (new.hour / 24, new.outcome, new.iterations, new.duration_ms, new.timed)
    ON CONFLICT (day, outcome) DO UPDATE SET iterations = iterations + excluded.iterations, duration_ms = duration_ms + excluded.duration_ms, timed = timed + excluded.timed;
END;
--> statement-breakpoint
CREATE TRIGGER IF NOT EXISTS iteration_stats_daily_update AFTER UPDATE ON iteration_stats_hourly BEGIN
  INSERT INTO iteration_stats_daily (day, outcome, iterations, duration_ms, timed)
    VALUES (new.hour / 24, new.outcome, new.iterations - old.iterations, new.duration_ms - old.duration_ms, new.timed - old.timed)
    ON CONFLICT (day, outcome) DO UPDATE SET iterations = iterations + excluded.iterations, duration_ms = duration_ms + excluded.duration_ms, timed = timed + excluded.timed;
END;
--> statement-breakpoint
CREATE TRIGGER IF NOT EXISTS iteration_stats_daily_delete AFTER DELETE ON iteration_stats_hourly BEGIN
  INSERT INTO iteration_stats_daily (day, outcome, iterations, duration_ms, timed)
    VALUES (old.hour / 24, old.outcome, -old.iterations, -old.duration_ms, -old.timed)
    ON CONFLICT (day, outcome) DO UPDATE SET iterations = iterations + excluded.iterations, duration_ms = duration_ms + excluded.duration_ms, timed = timed + excluded.timed;
  DELETE FROM iteration_stats_daily
    WHERE day = old.hour / 24 AND outcome = old.outcome AND iterations = 0;
END;
--> statement-breakpoint
CREATE TRIGGER IF NOT EXISTS tool_stats_daily_insert AFTER INSERT ON tool_stats_hourly BEGIN
  INSERT INTO tool_stats_daily (day, server, tool, calls, failures, duration_ms)
    VALUES (new.hour / 24, new.server, new.tool, new.calls, new.failures, new.duration_ms)
    ON CONFLICT (day, server, tool) DO UPDATE SET calls = calls + excluded.calls, failures = failures + excluded.failures, duration_ms = duration_ms + excluded.duration_ms;
END;
--> statement-breakpoint
CREATE TRIGGER IF NOT EXISTS tool_stats_daily_update AFTER UPDATE ON tool_stats_hourly BEGIN
  INSERT INTO tool_stats_daily (day, server, tool, calls, failures, duration_ms)
    VALUES (new.hour / 24, new.server, new.tool, new.calls - old.calls, new.failures - old.failures, new.duration_ms - old.duration_ms)
    ON CONFLICT (day, server, tool) DO UPDATE SET calls = calls + excluded.calls, failures = failures + excluded.failures, duration_ms = duration_ms + excluded.duration_ms;
END;
--> statement-breakpoint
CREATE TRIGGER IF NOT EXISTS tool_stats_daily_delete AFTER DELETE ON tool_stats_hourly BEGIN
  INSERT INTO tool_stats_daily (day, server, tool, calls, failures, duration_ms)
    VALUES (old.hour / 24, old.server, old.tool, -old.calls, -old.failures, -old.duration_ms)
    ON CONFLICT (day, server, tool) DO UPDATE SET calls = calls + excluded.calls, failures = failures + excluded.failures, duration_ms = duration_ms + excluded.duration_ms;
  DELETE FROM tool_stats_daily
    WHERE day = old.hour / 24 AND server = old.server AND tool = old.tool AND calls = 0;
END;
--> statement-breakpoint
CREATE TRIGGER IF NOT EXISTS tool_errors_daily_insert AFTER INSERT ON tool_errors_hourly BEGIN
  INSERT INTO tool_errors_daily (day, server, tool, error, count)
    VALUES (new.hour / 24, new.server, new.tool, new.error, new.count)
    ON CONFLICT (day, server, tool, error) DO UPDATE SET count = count + excluded.count;
END;
--> statement-breakpoint
CREATE TRIGGER IF NOT EXISTS tool_errors_daily_update AFTER UPDATE ON tool_errors_hourly BEGIN
  INSERT INTO tool_errors_daily (day, server, tool, error, count)
    VALUES (new.hour / 24, new.server, new.tool, new.error, new.count - old.count)
    ON CONFLICT (day, server, tool, error) DO UPDATE SET count = count + excluded.count;
END;
--> statement-breakpoint
CREATE TRIGGER IF NOT EXISTS tool_errors_daily_delete AFTER DELETE ON tool_errors_hourly BEGIN
  INSERT INTO tool_errors_daily (day, server, tool, error, count)
    VALUES (old.hour / 24, old.server, old.tool, old.error, -old.count)
    ON CONFLICT (day, server, tool, error) DO UPDATE SET count = count + excluded.count;
  DELETE FROM tool_errors_daily
    WHERE day = old.hour / 24 AND server = old.server AND tool = old.tool AND error = old.error AND count = 0;
END;
--> statement-breakpoint
-- The days summed from the hours (again, if this runs on a database that has it).
DELETE FROM run_stats_daily;
--> statement-breakpoint
DELETE FROM iteration_stats_daily;
--> statement-breakpoint
DELETE FROM tool_stats_daily;
--> statement-breakpoint
DELETE FROM tool_errors_daily;
--> statement-breakpoint
INSERT INTO run_stats_daily (day, status, reason, runs, iterations, iterations_runs, validation_failures, review_blockings, duration_ms, duration_runs)
  SELECT hour / 24, status, reason, sum(runs), sum(iterations), sum(iterations_runs), sum(validation_failures), sum(review_blockings), sum(duration_ms), sum(duration_runs)
  FROM run_stats_hourly GROUP BY 1, 2, 3;
--> statement-breakpoint
INSERT INTO iteration_stats_daily (day, outcome, iterations, duration_ms, timed)
  SELECT hour / 24, outcome, sum(iterations), sum(duration_ms), sum(timed)
  FROM iteration_stats_hourly GROUP BY 1, 2;
--> statement-breakpoint
INSERT INTO tool_stats_daily (day, server, tool, calls, failures, duration_ms)
  SELECT hour / 24, server, tool, sum(calls), sum(failures), sum(duration_ms)
  FROM tool_stats_hourly GROUP BY 1, 2, 3;
--> statement-breakpoint
INSERT INTO tool_errors_daily (day, server, tool, error, count)
  SELECT hour / 24, server, tool, error, sum(count)
  FROM tool_errors_hourly GROUP BY 1, 2, 3, 4;
