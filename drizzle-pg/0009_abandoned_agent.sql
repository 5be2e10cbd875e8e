-- An attempt abandoned while its agent ran (its worker died or lost the run, a stop ended the run
-- with no worker) now carries an agent result — killed, with no output kept, lasting until it was
-- found abandoned — as its agent_finished event already said. Attempts abandoned before had none
-- (agent null); they are given it the same way (their finished_at is when they were found).
-- An agent column update fires no statistics trigger (those watch status, outcome and times).
UPDATE "iterations" SET "agent" = json_build_object('exitCode', NULL, 'output', '[looprun] abandoned: the attempt ended before its agent''s result was recorded (its worker died or lost the run); the agent was killed and its output not kept', 'durationMs', GREATEST(0, coalesce("finished_at", "started_at") - "started_at")) WHERE "status" = 'abandoned' AND "agent" IS NULL;
