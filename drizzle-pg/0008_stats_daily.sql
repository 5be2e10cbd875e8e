CREATE TABLE IF NOT EXISTS "iteration_stats_daily" (
	"day" integer NOT NULL,
	"outcome" text NOT NULL,
	"iterations" integer NOT NULL,
	"duration_ms" bigint NOT NULL,
	"timed" integer NOT NULL,
	CONSTRAINT "iteration_stats_daily_day_outcome_pk" PRIMARY KEY("day","outcome")
);
--> statement-breakpoint
CREATE TABLE IF NOT EXISTS "run_stats_daily" (
	"day" integer NOT NULL,
	"status" text NOT NULL,
	"reason" text NOT NULL,
	"runs" integer NOT NULL,
	"iterations" integer NOT NULL,
	"iterations_runs" integer NOT NULL,
	"validation_failures" integer NOT NULL,
	"review_blockings" integer NOT NULL,
	"duration_ms" bigint NOT NULL,
	"duration_runs" integer NOT NULL,
	CONSTRAINT "run_stats_daily_day_status_reason_pk" PRIMARY KEY("day","status","reason")
);
--> statement-breakpoint
CREATE TABLE IF NOT EXISTS "tool_errors_daily" (
	"day" integer NOT NULL,
	"server" text NOT NULL,
	"tool" text NOT NULL,
	"error" text NOT NULL,
	"count" integer NOT NULL,
	CONSTRAINT "tool_errors_daily_day_server_tool_error_pk" PRIMARY KEY("day","server","tool","error")
);
--> statement-breakpoint
CREATE TABLE IF NOT EXISTS "tool_stats_daily" (
	"day" integer NOT NULL,
	"server" text NOT NULL,
	"tool" text NOT NULL,
	"calls" integer NOT NULL,
	"failures" integer NOT NULL,
	"duration_ms" bigint NOT NULL,
	CONSTRAINT "tool_stats_daily_day_server_tool_pk" PRIMARY KEY("day","server","tool")
);
--> statement-breakpoint
-- The sums of finished runs by day as well (the tables above), written by the functions that
-- fold a run into the hourly sums (0002), after all of those: every transaction writes the sums
-- in one order — run_stats_hourly, iteration_stats_hourly, tool_stats_hourly,
-- tool_errors_hourly, then the same by day, each by its key — so that two runs finishing at once
-- cannot deadlock. Written to run again on a database that has it (tables if not there,
-- functions replaced, the days summed again from the hours).
CREATE OR REPLACE FUNCTION looprun_stats_fold_run(r runs, sign integer) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
  h integer := r.created_at / 3600000;
  d integer := h / 24;
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

  -- The same by day, after every hourly sum: the one order of every writer of the sums.
  INSERT INTO run_stats_daily AS s (day, status, reason, runs, iterations, iterations_runs,
      validation_failures, review_blockings, duration_ms, duration_runs)
    VALUES (d, r.status, coalesce(r.reason, ''), sign,
      sign * coalesce((r.metrics ->> 'iterations')::bigint, 0),
      sign * ((r.metrics ->> 'iterations') IS NOT NULL)::integer,
      sign * coalesce((r.metrics ->> 'validationFailures')::bigint, 0),
      sign * coalesce((r.metrics ->> 'reviewBlockings')::bigint, 0),
      sign * coalesce(r.finished_at - r.started_at, 0),
      sign * ((r.finished_at - r.started_at) IS NOT NULL)::integer)
    ON CONFLICT (day, status, reason) DO UPDATE SET
      runs = s.runs + excluded.runs,
      iterations = s.iterations + excluded.iterations,
      iterations_runs = s.iterations_runs + excluded.iterations_runs,
      validation_failures = s.validation_failures + excluded.validation_failures,
      review_blockings = s.review_blockings + excluded.review_blockings,
      duration_ms = s.duration_ms + excluded.duration_ms,
      duration_runs = s.duration_runs + excluded.duration_runs;

  INSERT INTO iteration_stats_daily AS s (day, outcome, iterations, duration_ms, timed)
    SELECT d, coalesce(i.outcome, ''), sign * count(*),
      sign * coalesce(sum(i.finished_at - i.started_at), 0), sign * count(i.finished_at)
    FROM iterations i
    WHERE i.run_id = r.id AND i.status IN ('passed', 'failed')
    GROUP BY 2 ORDER BY 2
    ON CONFLICT (day, outcome) DO UPDATE SET
      iterations = s.iterations + excluded.iterations,
      duration_ms = s.duration_ms + excluded.duration_ms,
      timed = s.timed + excluded.timed;

  INSERT INTO tool_stats_daily AS s (day, server, tool, calls, failures, duration_ms)
    SELECT t.created_at / 3600000 / 24, t.server, t.tool, sign * count(*),
      sign * count(*) FILTER (WHERE t.is_error), sign * sum(t.duration_ms)
    FROM tool_calls t
    WHERE t.run_id = r.id
    GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
    ON CONFLICT (day, server, tool) DO UPDATE SET
      calls = s.calls + excluded.calls,
      failures = s.failures + excluded.failures,
      duration_ms = s.duration_ms + excluded.duration_ms;

  INSERT INTO tool_errors_daily AS s (day, server, tool, error, count)
    SELECT t.created_at / 3600000 / 24, t.server, t.tool, substr(t.result, 1, 200), sign * count(*)
    FROM tool_calls t
    WHERE t.run_id = r.id AND t.is_error
    GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3, 4
    ON CONFLICT (day, server, tool, error) DO UPDATE SET count = s.count + excluded.count;

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
    DELETE FROM run_stats_daily
      WHERE day = d AND status = r.status AND reason = coalesce(r.reason, '') AND runs = 0;
    DELETE FROM iteration_stats_daily WHERE day = d AND iterations = 0;
    DELETE FROM tool_stats_daily s
      USING (SELECT DISTINCT created_at / 3600000 / 24 AS day, server, tool
             FROM tool_calls WHERE run_id = r.id) k
      WHERE s.day = k.day AND s.server = k.server AND s.tool = k.tool AND s.calls = 0;
    DELETE FROM tool_errors_daily s
      USING (SELECT DISTINCT created_at / 3600000 / 24 AS day, server, tool, substr(result, 1, 200) AS error
             FROM tool_calls WHERE run_id = r.id AND is_error) k
      WHERE s.day = k.day AND s.server = k.server AND s.tool = k.tool AND s.error = k.error
        AND s.count = 0;
  END IF;
END $$;
--> statement-breakpoint
-- One iteration of a finished run.
CREATE OR REPLACE FUNCTION looprun_stats_fold_iteration(i iterations, sign integer) RETURNS void
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
  INSERT INTO iteration_stats_daily AS s (day, outcome, iterations, duration_ms, timed)
    VALUES (h / 24, coalesce(i.outcome, ''), sign, sign * coalesce(i.finished_at - i.started_at, 0),
      sign * (i.finished_at IS NOT NULL)::integer)
    ON CONFLICT (day, outcome) DO UPDATE SET
      iterations = s.iterations + excluded.iterations,
      duration_ms = s.duration_ms + excluded.duration_ms,
      timed = s.timed + excluded.timed;
  IF sign < 0 THEN
    DELETE FROM iteration_stats_hourly
      WHERE hour = h AND outcome = coalesce(i.outcome, '') AND iterations = 0;
    DELETE FROM iteration_stats_daily
      WHERE day = h / 24 AND outcome = coalesce(i.outcome, '') AND iterations = 0;
  END IF;
END $$;
--> statement-breakpoint
-- One tool call of a finished run.
CREATE OR REPLACE FUNCTION looprun_stats_fold_tool_call(t tool_calls, sign integer) RETURNS void
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
  INSERT INTO tool_stats_daily AS s (day, server, tool, calls, failures, duration_ms)
    VALUES (h / 24, t.server, t.tool, sign, sign * t.is_error::integer, sign * t.duration_ms)
    ON CONFLICT (day, server, tool) DO UPDATE SET
      calls = s.calls + excluded.calls,
      failures = s.failures + excluded.failures,
      duration_ms = s.duration_ms + excluded.duration_ms;
  IF t.is_error THEN
    INSERT INTO tool_errors_daily AS s (day, server, tool, error, count)
      VALUES (h / 24, t.server, t.tool, substr(t.result, 1, 200), sign)
      ON CONFLICT (day, server, tool, error) DO UPDATE SET count = s.count + excluded.count;
  END IF;
  IF sign < 0 THEN
    DELETE FROM tool_stats_hourly
      WHERE hour = h AND server = t.server AND tool = t.tool AND calls = 0;
    DELETE FROM tool_errors_hourly
      WHERE hour = h AND server = t.server AND tool = t.tool AND error = substr(t.result, 1, 200)
        AND count = 0;
    DELETE FROM tool_stats_daily
      WHERE day = h / 24 AND server = t.server AND tool = t.tool AND calls = 0;
    DELETE FROM tool_errors_daily
      WHERE day = h / 24 AND server = t.server AND tool = t.tool AND error = substr(t.result, 1, 200)
        AND count = 0;
  END IF;
END $$;
--> statement-breakpoint
TRUNCATE run_stats_daily, iteration_stats_daily, tool_stats_daily, tool_errors_daily;
--> statement-breakpoint
INSERT INTO run_stats_daily (day, status, reason, runs, iterations, iterations_runs,
    validation_failures, review_blockings, duration_ms, duration_runs)
  SELECT hour / 24, status, reason, sum(runs), sum(iterations), sum(iterations_runs),
    sum(validation_failures), sum(review_blockings), sum(duration_ms), sum(duration_runs)
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
