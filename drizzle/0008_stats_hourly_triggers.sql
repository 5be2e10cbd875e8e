-- Keeps the *_stats_hourly tables (schema.ts) up to date in the transaction of every write,
-- whatever code path writes, and fills them from the rows already there.
CREATE TRIGGER run_stats_hourly_insert AFTER INSERT ON runs BEGIN
  INSERT INTO run_stats_hourly (hour, status, reason, runs, iterations, iterations_runs, validation_failures, review_blockings, duration_ms, duration_runs)
    VALUES (new.created_at / 3600000, new.status, coalesce(new.reason, ''), 1, 1 * coalesce(json_extract(new.metrics, '$.iterations'), 0), 1 * (json_extract(new.metrics, '$.iterations') is not null), 1 * coalesce(json_extract(new.metrics, '$.validationFailures'), 0), 1 * coalesce(json_extract(new.metrics, '$.reviewBlockings'), 0), 1 * coalesce(new.finished_at - new.started_at, 0), 1 * (new.finished_at - new.started_at is not null))
    ON CONFLICT (hour, status, reason) DO UPDATE SET runs = runs + excluded.runs, iterations = iterations + excluded.iterations, iterations_runs = iterations_runs + excluded.iterations_runs, validation_failures = validation_failures + excluded.validation_failures, review_blockings = review_blockings + excluded.review_blockings, duration_ms = duration_ms + excluded.duration_ms, duration_runs = duration_runs + excluded.duration_runs;
END;
--> statement-breakpoint
CREATE TRIGGER run_stats_hourly_update AFTER UPDATE OF status, reason, metrics, started_at, finished_at, created_at ON runs
WHEN old.status IS NOT new.status OR old.reason IS NOT new.reason OR old.metrics IS NOT new.metrics
  OR old.started_at IS NOT new.started_at OR old.finished_at IS NOT new.finished_at OR old.created_at IS NOT new.created_at
BEGIN
  INSERT INTO run_stats_hourly (hour, status, reason, runs, iterations, iterations_runs, validation_failures, review_blockings, duration_ms, duration_runs)
    VALUES (old.created_at / 3600000, old.status, coalesce(old.reason, ''), -1, -1 * coalesce(json_extract(old.metrics, '$.iterations'), 0), -1 * (json_extract(old.metrics, '$.iterations') is not null), -1 * coalesce(json_extract(old.metrics, '$.validationFailures'), 0), -1 * coalesce(json_extract(old.metrics, '$.reviewBlockings'), 0), -1 * coalesce(old.finished_at - old.started_at, 0), -1 * (old.finished_at - old.started_at is not null))
    ON CONFLICT (hour, status, reason) DO UPDATE SET runs = runs + excluded.runs, iterations = iterations + excluded.iterations, iterations_runs = iterations_runs + excluded.iterations_runs, validation_failures = validation_failures + excluded.validation_failures, review_blockings = review_blockings + excluded.review_blockings, duration_ms = duration_ms + excluded.duration_ms, duration_runs = duration_runs + excluded.duration_runs;
  DELETE FROM run_stats_hourly
    WHERE hour = old.created_at / 3600000 AND status = old.status AND reason = coalesce(old.reason, '') AND runs = 0;
  INSERT INTO run_stats_hourly (hour, status, reason, runs, iterations, iterations_runs, validation_failures, review_blockings, duration_ms, duration_runs)
    VALUES (new.created_at / 3600000, new.status, coalesce(new.reason, ''), 1, 1 * coalesce(json_extract(new.metrics, '$.iterations'), 0), 1 * (json_extract(new.metrics, '$.iterations') is not null), 1 * coalesce(json_extract(new.metrics, '$.validationFailures'), 0), 1 * coalesce(json_extract(new.metrics, '$.reviewBlockings'), 0), 1 * coalesce(new.finished_at - new.started_at, 0), 1 * (new.finished_at - new.started_at is not null))
    ON CONFLICT (hour, status, reason) DO UPDATE SET runs = runs + excluded.runs, iterations = iterations + excluded.iterations, iterations_runs = iterations_runs + excluded.iterations_runs, validation_failures = validation_failures + excluded.validation_failures, review_blockings = review_blockings + excluded.review_blockings, duration_ms = duration_ms + excluded.duration_ms, duration_runs = duration_runs + excluded.duration_runs;
END;
--> statement-breakpoint
-- BEFORE: the cascade deletes the run's iterations after the run row is gone, when their
-- trigger can no longer find the run's hour.
CREATE TRIGGER run_stats_hourly_delete BEFORE DELETE ON runs BEGIN
  INSERT INTO run_stats_hourly (hour, status, reason, runs, iterations, iterations_runs, validation_failures, review_blockings, duration_ms, duration_runs)
    VALUES (old.created_at / 3600000, old.status, coalesce(old.reason, ''), -1, -1 * coalesce(json_extract(old.metrics, '$.iterations'), 0), -1 * (json_extract(old.metrics, '$.iterations') is not null), -1 * coalesce(json_extract(old.metrics, '$.validationFailures'), 0), -1 * coalesce(json_extract(old.metrics, '$.reviewBlockings'), 0), -1 * coalesce(old.finished_at - old.started_at, 0), -1 * (old.finished_at - old.started_at is not null))
    ON CONFLICT (hour, status, reason) DO UPDATE SET runs = runs + excluded.runs, iterations = iterations + excluded.iterations, iterations_runs = iterations_runs + excluded.iterations_runs, validation_failures = validation_failures + excluded.validation_failures, review_blockings = review_blockings + excluded.review_blockings, duration_ms = duration_ms + excluded.duration_ms, duration_runs = duration_runs + excluded.duration_runs;
  DELETE FROM run_stats_hourly
    WHERE hour = old.created_at / 3600000 AND status = old.status AND reason = coalesce(old.reason, '') AND runs = 0;
  INSERT INTO iteration_stats_hourly (hour, outcome, iterations, duration_ms, timed)
    SELECT old.created_at / 3600000, coalesce(outcome, ''), -count(*), -coalesce(sum(finished_at - started_at), 0), -count(finished_at)
    FROM iterations WHERE run_id = old.id AND status IN ('passed', 'failed') GROUP BY coalesce(outcome, '')
    ON CONFLICT (hour, outcome) DO UPDATE SET iterations = iterations + excluded.iterations, duration_ms = duration_ms + excluded.duration_ms, timed = timed + excluded.timed;
  DELETE FROM iteration_stats_hourly WHERE hour = old.created_at / 3600000 AND iterations = 0;
END;
--> statement-breakpoint
CREATE TRIGGER iteration_stats_hourly_insert AFTER INSERT ON iterations BEGIN
  INSERT INTO iteration_stats_hourly (hour, outcome, iterations, duration_ms, timed)
    SELECT r.created_at / 3600000, coalesce(new.outcome, ''), 1, 1 * coalesce(new.finished_at - new.started_at, 0), 1 * (new.finished_at is not null)
    FROM runs r WHERE r.id = new.run_id AND new.status IN ('passed', 'failed')
    ON CONFLICT (hour, outcome) DO UPDATE SET iterations = iterations + excluded.iterations, duration_ms = duration_ms + excluded.duration_ms, timed = timed + excluded.timed;
END;
--> statement-breakpoint
CREATE TRIGGER iteration_stats_hourly_update AFTER UPDATE OF run_id, status, outcome, started_at, finished_at ON iterations
WHEN old.run_id IS NOT new.run_id OR old.status IS NOT new.status OR old.outcome IS NOT new.outcome
  OR old.started_at IS NOT new.started_at OR old.finished_at IS NOT new.finished_at
BEGIN
  INSERT INTO iteration_stats_hourly (hour, outcome, iterations, duration_ms, timed)
    SELECT r.created_at / 3600000, coalesce(old.outcome, ''), -1, -1 * coalesce(old.finished_at - old.started_at, 0), -1 * (old.finished_at is not null)
    FROM runs r WHERE r.id = old.run_id AND old.status IN ('passed', 'failed')
    ON CONFLICT (hour, outcome) DO UPDATE SET iterations = iterations + excluded.iterations, duration_ms = duration_ms + excluded.duration_ms, timed = timed + excluded.timed;
  DELETE FROM iteration_stats_hourly
    WHERE hour = (SELECT created_at / 3600000 FROM runs WHERE id = old.run_id) AND outcome = coalesce(old.outcome, '') AND iterations = 0;
  INSERT INTO iteration_stats_hourly (hour, outcome, iterations, duration_ms, timed)
    SELECT r.created_at / 3600000, coalesce(new.outcome, ''), 1, 1 * coalesce(new.finished_at - new.started_at, 0), 1 * (new.finished_at is not null)
    FROM runs r WHERE r.id = new.run_id AND new.status IN ('passed', 'failed')
    ON CONFLICT (hour, outcome) DO UPDATE SET iterations = iterations + excluded.iterations, duration_ms = duration_ms + excluded.duration_ms, timed = timed + excluded.timed;
END;
--> statement-breakpoint
CREATE TRIGGER iteration_stats_hourly_delete AFTER DELETE ON iterations BEGIN
  INSERT INTO iteration_stats_hourly (hour, outcome, iterations, duration_ms, timed)
    SELECT r.created_at / 3600000, coalesce(old.outcome, ''), -1, -1 * coalesce(old.finished_at - old.started_at, 0), -1 * (old.finished_at is not null)
    FROM runs r WHERE r.id = old.run_id AND old.status IN ('passed', 'failed')
    ON CONFLICT (hour, outcome) DO UPDATE SET iterations = iterations + excluded.iterations, duration_ms = duration_ms + excluded.duration_ms, timed = timed + excluded.timed;
  DELETE FROM iteration_stats_hourly
    WHERE hour = (SELECT created_at / 3600000 FROM runs WHERE id = old.run_id) AND outcome = coalesce(old.outcome, '') AND iterations = 0;
END;
--> statement-breakpoint
CREATE TRIGGER tool_stats_hourly_insert AFTER INSERT ON tool_calls BEGIN
  INSERT INTO tool_stats_hourly (hour, server, tool, calls, failures, duration_ms)
    VALUES (new.created_at / 3600000, new.server, new.tool, 1, 1 * new.is_error, 1 * new.duration_ms)
    ON CONFLICT (hour, server, tool) DO UPDATE SET calls = calls + excluded.calls, failures = failures + excluded.failures, duration_ms = duration_ms + excluded.duration_ms;
  INSERT INTO tool_errors_hourly (hour, server, tool, error, count)
    SELECT new.created_at / 3600000, new.server, new.tool, substr(new.result, 1, 200), 1 WHERE new.is_error = 1
    ON CONFLICT (hour, server, tool, error) DO UPDATE SET count = count + excluded.count;
END;
--> statement-breakpoint
CREATE TRIGGER tool_stats_hourly_update AFTER UPDATE OF server, tool, is_error, result, duration_ms, created_at ON tool_calls
WHEN old.server IS NOT new.server OR old.tool IS NOT new.tool OR old.is_error IS NOT new.is_error
  OR old.result IS NOT new.result OR old.duration_ms IS NOT new.duration_ms OR old.created_at IS NOT new.created_at
BEGIN
  INSERT INTO tool_stats_hourly (hour, server, tool, calls, failures, duration_ms)
    VALUES (old.created_at / 3600000, old.server, old.tool, -1, -1 * old.is_error, -1 * old.duration_ms)
    ON CONFLICT (hour, server, tool) DO UPDATE SET calls = calls + excluded.calls, failures = failures + excluded.failures, duration_ms = duration_ms + excluded.duration_ms;
  DELETE FROM tool_stats_hourly WHERE hour = old.created_at / 3600000 AND server = old.server AND tool = old.tool AND calls = 0;
  INSERT INTO tool_errors_hourly (hour, server, tool, error, count)
    SELECT old.created_at / 3600000, old.server, old.tool, substr(old.result, 1, 200), -1 WHERE old.is_error = 1
    ON CONFLICT (hour, server, tool, error) DO UPDATE SET count = count + excluded.count;
  DELETE FROM tool_errors_hourly WHERE hour = old.created_at / 3600000 AND server = old.server AND tool = old.tool AND error = substr(old.result, 1, 200) AND count = 0;
  INSERT INTO tool_stats_hourly (hour, server, tool, calls, failures, duration_ms)
    VALUES (new.created_at / 3600000, new.server, new.tool, 1, 1 * new.is_error, 1 * new.duration_ms)
    ON CONFLICT (hour, server, tool) DO UPDATE SET calls = calls + excluded.calls, failures = failures + excluded.failures, duration_ms = duration_ms + excluded.duration_ms;
  INSERT INTO tool_errors_hourly (hour, server, tool, error, count)
    SELECT new.created_at / 3600000, new.server, new.tool, substr(new.result, 1, 200), 1 WHERE new.is_error = 1
    ON CONFLICT (hour, server, tool, error) DO UPDATE SET count = count + excluded.count;
END;
--> statement-breakpoint
CREATE TRIGGER tool_stats_hourly_delete AFTER DELETE ON tool_calls BEGIN
  INSERT INTO tool_stats_hourly (hour, server, tool, calls, failures, duration_ms)
    VALUES (old.created_at / 3600000, old.server, old.tool, -1, -1 * old.is_error, -1 * old.duration_ms)
    ON CONFLICT (hour, server, tool) DO UPDATE SET calls = calls + excluded.calls, failures = failures + excluded.failures, duration_ms = duration_ms + excluded.duration_ms;
  DELETE FROM tool_stats_hourly WHERE hour = old.created_at / 3600000 AND server = old.server AND tool = old.tool AND calls = 0;
  INSERT INTO tool_errors_hourly (hour, server, tool, error, count)
    SELECT old.created_at / 3600000, old.server, old.tool, substr(old.result, 1, 200), -1 WHERE old.is_error = 1
    ON CONFLICT (hour, server, tool, error) DO UPDATE SET count = count + excluded.count;
  DELETE FROM tool_errors_hourly WHERE hour = old.created_at / 3600000 AND server = old.server AND tool = old.tool AND error = substr(old.result, 1, 200) AND count = 0;
END;
--> statement-breakpoint
INSERT INTO run_stats_hourly (hour, status, reason, runs, iterations, iterations_runs, validation_failures, review_blockings, duration_ms, duration_runs)
  SELECT created_at / 3600000, status, coalesce(reason, ''), count(*), coalesce(sum(json_extract(metrics, '$.iterations')), 0), count(json_extract(metrics, '$.iterations')),
    coalesce(sum(json_extract(metrics, '$.validationFailures')), 0), coalesce(sum(json_extract(metrics, '$.reviewBlockings')), 0),
    coalesce(sum(finished_at - started_at), 0), count(finished_at - started_at)
  FROM runs GROUP BY 1, 2, 3;
--> statement-breakpoint
INSERT INTO iteration_stats_hourly (hour, outcome, iterations, duration_ms, timed)
  SELECT r.created_at / 3600000, coalesce(i.outcome, ''), count(*), coalesce(sum(i.finished_at - i.started_at), 0), count(i.finished_at)
  FROM iterations i JOIN runs r ON r.id = i.run_id WHERE i.status IN ('passed', 'failed') GROUP BY 1, 2;
--> statement-breakpoint
INSERT INTO tool_stats_hourly (hour, server, tool, calls, failures, duration_ms)
  SELECT created_at / 3600000, server, tool, count(*), sum(is_error), sum(duration_ms) FROM tool_calls GROUP BY 1, 2, 3;
--> statement-breakpoint
INSERT INTO tool_errors_hourly (hour, server, tool, error, count)
  SELECT created_at / 3600000, server, tool, substr(result, 1, 200), count(*) FROM tool_calls WHERE is_error = 1 GROUP BY 1, 2, 3, 4;
