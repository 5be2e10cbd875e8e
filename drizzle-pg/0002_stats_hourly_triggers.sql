-- Keeps the *_stats_hourly tables (schema.ts) up to date in the transaction of every write, as
-- SQLite's triggers do (drizzle/0008), with one difference: here the sums hold the runs that
-- have finished (succeeded, failed, stopped) with their iterations and tool calls, and the
-- statistics queries (packages/db/src/pg/stats-hourly.ts) read the active runs — few by
-- nature — from their rows. A submit, and the commits of a running run, then touch no summary
-- row: with many writers at once they would all queue behind the same few rows (a row lock
-- is held until commit). A run's part is added once, by the statement that finishes it.
--
-- Every transaction that writes summary rows writes them in one order — run_stats_hourly,
-- iteration_stats_hourly, tool_stats_hourly, tool_errors_hourly, each by its key — so that
-- two runs finishing at once cannot deadlock.
CREATE FUNCTION looprun_is_terminal(status text) RETURNS boolean
  LANGUAGE sql IMMUTABLE PARALLEL SAFE
  AS $$ SELECT status IN ('succeeded', 'failed', 'stopped') $$;
--> statement-breakpoint
-- Adds (sign 1) or takes away (sign -1) a finished run: its row, its decided iterations and
-- its tool calls.
CREATE FUNCTION looprun_stats_fold_run(r runs, sign integer) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
  h integer := r.created_at / 3600000;
BEGIN
  INSERT INTO run_stats_hourly AS s (hour, status, reason, runs, iterations, iterations_runs,
      validation_failures, review_blockings, duration_ms, duration_runs)
    VALUES (h, r.status, coalesce(r.reason, ''), sign,
      sign * coalesce((r.metrics ->> 'iterations')::bigint, 0),
      sign * ((r.metrics ->> 'iterations') IS NOT NULL)::integer,
      sign * coalesce((r.metrics ->> 'validationFailures')::bigint, 0),
      sign * coalesce((r.metrics ->> 'reviewBlockings')::bigint, 0),
      sign * coalesce(r.finished_at - r.started_at, 0),
      sign * ((r.finished_at - r.started_at) IS NOT NULL)::integer)
    ON CONFLICT (hour, status, reason) DO UPDATE SET
      runs = s.runs + excluded.runs,
      iterations = s.iterations + excluded.iterations,
      iterations_runs = s.iterations_runs + excluded.iterations_runs,
      validation_failures = s.validation_failures + excluded.validation_failures,
      review_blockings = s.review_blockings + excluded.review_blockings,
      duration_ms = s.duration_ms + excluded.duration_ms,
      duration_runs = s.duration_runs + excluded.duration_runs;

  INSERT INTO iteration_stats_hourly AS s (hour, outcome, iterations, duration_ms, timed)
    SELECT h, coalesce(i.outcome, ''), sign * count(*),
      sign * coalesce(sum(i.finished_at - i.started_at), 0), sign * count(i.finished_at)
    FROM iterations i
    WHERE i.run_id = r.id AND i.status IN ('passed', 'failed')
    GROUP BY 2 ORDER BY 2
    ON CONFLICT (hour, outcome) DO UPDATE SET
      iterations = s.iterations + excluded.iterations,
      duration_ms = s.duration_ms + excluded.duration_ms,
      timed = s.timed + excluded.timed;

  INSERT INTO tool_stats_hourly AS s (hour, server, tool, calls, failures, duration_ms)
    SELECT t.created_at / 3600000, t.server, t.tool, sign * count(*),
      sign * count(*) FILTER (WHERE t.is_error), sign * sum(t.duration_ms)
    FROM tool_calls t
    WHERE t.run_id = r.id
    GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
    ON CONFLICT (hour, server, tool) DO UPDATE SET
      calls = s.calls + excluded.calls,
      failures = s.failures + excluded.failures,
      duration_ms = s.duration_ms + excluded.duration_ms;

  INSERT INTO tool_errors_hourly AS s (hour, server, tool, error, count)
    SELECT t.created_at / 3600000, t.server, t.tool, substr(t.result, 1, 200), sign * count(*)
    FROM tool_calls t
    WHERE t.run_id = r.id AND t.is_error
    GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3, 4
    ON CONFLICT (hour, server, tool, error) DO UPDATE SET count = s.count + excluded.count;

  IF sign < 0 THEN
    DELETE FROM run_stats_hourly
      WHERE hour = h AND status = r.status AND reason = coalesce(r.reason, '') AND runs = 0;
    DELETE FROM iteration_stats_hourly WHERE hour = h AND iterations = 0;
    DELETE FROM tool_stats_hourly s
      USING (SELECT DISTINCT created_at / 3600000 AS hour, server, tool
             FROM tool_calls WHERE run_id = r.id) k
      WHERE s.hour = k.hour AND s.server = k.server AND s.tool = k.tool AND s.calls = 0;
    DELETE FROM tool_errors_hourly s
      USING (SELECT DISTINCT created_at / 3600000 AS hour, server, tool, substr(result, 1, 200) AS error
             FROM tool_calls WHERE run_id = r.id AND is_error) k
      WHERE s.hour = k.hour AND s.server = k.server AND s.tool = k.tool AND s.error = k.error
        AND s.count = 0;
  END IF;
END $$;
--> statement-breakpoint
-- One iteration of a finished run (written after the run finished: in the transaction that
-- finishes it, or later).
CREATE FUNCTION looprun_stats_fold_iteration(i iterations, sign integer) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
  h integer;
BEGIN
  IF i.status NOT IN ('passed', 'failed') THEN RETURN; END IF;
  SELECT created_at / 3600000 INTO h FROM runs
    WHERE id = i.run_id AND looprun_is_terminal(status);
  IF NOT FOUND THEN RETURN; END IF;
  INSERT INTO iteration_stats_hourly AS s (hour, outcome, iterations, duration_ms, timed)
    VALUES (h, coalesce(i.outcome, ''), sign, sign * coalesce(i.finished_at - i.started_at, 0),
      sign * (i.finished_at IS NOT NULL)::integer)
    ON CONFLICT (hour, outcome) DO UPDATE SET
      iterations = s.iterations + excluded.iterations,
      duration_ms = s.duration_ms + excluded.duration_ms,
      timed = s.timed + excluded.timed;
  IF sign < 0 THEN
    DELETE FROM iteration_stats_hourly
      WHERE hour = h AND outcome = coalesce(i.outcome, '') AND iterations = 0;
  END IF;
END $$;
--> statement-breakpoint
-- One tool call of a finished run.
CREATE FUNCTION looprun_stats_fold_tool_call(t tool_calls, sign integer) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
  h integer := t.created_at / 3600000;
BEGIN
  PERFORM 1 FROM runs WHERE id = t.run_id AND looprun_is_terminal(status);
  IF NOT FOUND THEN RETURN; END IF;
  INSERT INTO tool_stats_hourly AS s (hour, server, tool, calls, failures, duration_ms)
    VALUES (h, t.server, t.tool, sign, sign * t.is_error::integer, sign * t.duration_ms)
    ON CONFLICT (hour, server, tool) DO UPDATE SET
      calls = s.calls + excluded.calls,
      failures = s.failures + excluded.failures,
      duration_ms = s.duration_ms + excluded.duration_ms;
  IF t.is_error THEN
    INSERT INTO tool_errors_hourly AS s (hour, server, tool, error, count)
      VALUES (h, t.server, t.tool, substr(t.result, 1, 200), sign)
      ON CONFLICT (hour, server, tool, error) DO UPDATE SET count = s.count + excluded.count;
  END IF;
  IF sign < 0 THEN
    DELETE FROM tool_stats_hourly
      WHERE hour = h AND server = t.server AND tool = t.tool AND calls = 0;
    DELETE FROM tool_errors_hourly
      WHERE hour = h AND server = t.server AND tool = t.tool AND error = substr(t.result, 1, 200)
        AND count = 0;
  END IF;
END $$;
--> statement-breakpoint
CREATE FUNCTION looprun_runs_stats() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP <> 'INSERT' AND looprun_is_terminal(OLD.status) THEN
    PERFORM looprun_stats_fold_run(OLD, -1);
  END IF;
  IF TG_OP <> 'DELETE' AND looprun_is_terminal(NEW.status) THEN
    PERFORM looprun_stats_fold_run(NEW, 1);
  END IF;
  IF TG_OP = 'DELETE' THEN RETURN OLD; END IF;
  RETURN NEW;
END $$;
--> statement-breakpoint
CREATE FUNCTION looprun_iterations_stats() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP <> 'INSERT' THEN PERFORM looprun_stats_fold_iteration(OLD, -1); END IF;
  IF TG_OP <> 'DELETE' THEN PERFORM looprun_stats_fold_iteration(NEW, 1); END IF;
  RETURN NULL;
END $$;
--> statement-breakpoint
CREATE FUNCTION looprun_tool_calls_stats() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP <> 'INSERT' THEN PERFORM looprun_stats_fold_tool_call(OLD, -1); END IF;
  IF TG_OP <> 'DELETE' THEN PERFORM looprun_stats_fold_tool_call(NEW, 1); END IF;
  RETURN NULL;
END $$;
--> statement-breakpoint
CREATE TRIGGER run_stats_hourly_insert AFTER INSERT ON runs
  FOR EACH ROW WHEN (looprun_is_terminal(NEW.status))
  EXECUTE FUNCTION looprun_runs_stats();
--> statement-breakpoint
CREATE TRIGGER run_stats_hourly_update
  AFTER UPDATE OF status, reason, metrics, started_at, finished_at, created_at ON runs
  FOR EACH ROW WHEN (
    (looprun_is_terminal(OLD.status) OR looprun_is_terminal(NEW.status))
    AND (OLD.status, OLD.reason, OLD.metrics::text, OLD.started_at, OLD.finished_at, OLD.created_at)
      IS DISTINCT FROM (NEW.status, NEW.reason, NEW.metrics::text, NEW.started_at, NEW.finished_at, NEW.created_at))
  EXECUTE FUNCTION looprun_runs_stats();
--> statement-breakpoint
-- BEFORE: the cascade deletes the run's iterations and tool calls after the run row is gone,
-- when their triggers can no longer find it.
CREATE TRIGGER run_stats_hourly_delete BEFORE DELETE ON runs
  FOR EACH ROW WHEN (looprun_is_terminal(OLD.status))
  EXECUTE FUNCTION looprun_runs_stats();
--> statement-breakpoint
CREATE TRIGGER iteration_stats_hourly_insert AFTER INSERT ON iterations
  FOR EACH ROW WHEN (NEW.status IN ('passed', 'failed'))
  EXECUTE FUNCTION looprun_iterations_stats();
--> statement-breakpoint
CREATE TRIGGER iteration_stats_hourly_update
  AFTER UPDATE OF run_id, status, outcome, started_at, finished_at ON iterations
  FOR EACH ROW WHEN (
    (OLD.status IN ('passed', 'failed') OR NEW.status IN ('passed', 'failed'))
    AND (OLD.run_id, OLD.status, OLD.outcome, OLD.started_at, OLD.finished_at)
      IS DISTINCT FROM (NEW.run_id, NEW.status, NEW.outcome, NEW.started_at, NEW.finished_at))
  EXECUTE FUNCTION looprun_iterations_stats();
--> statement-breakpoint
CREATE TRIGGER iteration_stats_hourly_delete AFTER DELETE ON iterations
  FOR EACH ROW WHEN (OLD.status IN ('passed', 'failed'))
  EXECUTE FUNCTION looprun_iterations_stats();
--> statement-breakpoint
CREATE TRIGGER tool_stats_hourly_insert AFTER INSERT ON tool_calls
  FOR EACH ROW EXECUTE FUNCTION looprun_tool_calls_stats();
--> statement-breakpoint
CREATE TRIGGER tool_stats_hourly_update
  AFTER UPDATE OF run_id, server, tool, is_error, result, duration_ms, created_at ON tool_calls
  FOR EACH ROW WHEN (
    (OLD.run_id, OLD.server, OLD.tool, OLD.is_error, OLD.result, OLD.duration_ms, OLD.created_at)
      IS DISTINCT FROM (NEW.run_id, NEW.server, NEW.tool, NEW.is_error, NEW.result, NEW.duration_ms, NEW.created_at))
  EXECUTE FUNCTION looprun_tool_calls_stats();
--> statement-breakpoint
CREATE TRIGGER tool_stats_hourly_delete AFTER DELETE ON tool_calls
  FOR EACH ROW EXECUTE FUNCTION looprun_tool_calls_stats();
--> statement-breakpoint
-- The runs that finished before this migration.
TRUNCATE run_stats_hourly, iteration_stats_hourly, tool_stats_hourly, tool_errors_hourly;
--> statement-breakpoint
SELECT looprun_stats_fold_run(r, 1) FROM runs r WHERE looprun_is_terminal(r.status);
