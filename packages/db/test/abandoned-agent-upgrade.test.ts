import { ABANDONED_AGENT_OUTPUT } from "@looprun/core";
import { describe, expect, it } from "vitest";
import { upgradedPg } from "./pg-support";
import { upgradedSqlite } from "./support";

// Attempts an older version abandoned while their agent ran kept `agent: null`: a migration
// (SQLite 0014, PostgreSQL 0009) gives them the agent result a newer version writes — killed,
// no output kept, lasting until the attempt was found abandoned. Each test makes the database
// of that version: migrated, its record of the migration removed, the rows as it wrote them.

const seedRows = [
  "insert into sessions (id, workspace, created_at) values ('s', '/w', 0)",
  "insert into runs (id, session_id, task, spec, workspace, status, metrics, created_at) values ('r', 's', 't', '{}', '/w', 'succeeded', '{}', 0)",
];
const KEPT = { exitCode: null, output: "killed by the hand-back\n", durationMs: 40 };
/** attempt, status, outcome, agent (JSON or null), started_at, finished_at */
const iterationRows: [number, string, string, string | null, number, number | null][] = [
  [1, "abandoned", "error", null, 1000, 8500], // its worker died mid-agent
  [2, "abandoned", "stopped", JSON.stringify(KEPT), 9000, 9040], // handed back: its agent's output kept
  [3, "passed", "complete", JSON.stringify({ exitCode: 0, output: "", durationMs: 5 }), 9100, 9200],
];
const expected = [
  {
    attempt: 1,
    agent: { exitCode: null, output: ABANDONED_AGENT_OUTPUT, durationMs: 7500 },
  },
  { attempt: 2, agent: KEPT },
  { attempt: 3, agent: { exitCode: 0, output: "", durationMs: 5 } },
];

describe("attempts an older version abandoned with agent: null", () => {
  it("are given the abandoned agent's result by the SQLite migration", async () => {
    const rows = await upgradedSqlite(
      "0014_abandoned_agent",
      (sqlite) => {
        for (const row of seedRows) sqlite.prepare(row).run();
        const insert = sqlite.prepare(
          "insert into iterations (run_id, n, attempt, status, outcome, prompt, agent, validation, started_at, finished_at) values ('r', 1, ?, ?, ?, 'p', ?, '[]', ?, ?)",
        );
        for (const row of iterationRows) insert.run(...row);
      },
      ({ sqlite }) =>
        sqlite.prepare("select attempt, agent from iterations order by attempt").all() as {
          attempt: number;
          agent: string;
        }[],
    );
    expect(rows.map((r) => ({ attempt: r.attempt, agent: JSON.parse(r.agent) }))).toEqual(expected);
  });

  it("are given the abandoned agent's result by the PostgreSQL migration", async () => {
    const rows = await upgradedPg(
      "0009_abandoned_agent",
      async (pool) => {
        for (const row of seedRows) await pool.query(row);
        for (const row of iterationRows) {
          await pool.query(
            "insert into iterations (run_id, n, attempt, status, outcome, prompt, agent, validation, started_at, finished_at) values ('r', 1, $1, $2, $3, 'p', $4, '[]', $5, $6)",
            row,
          );
        }
      },
      async ({ pool }) =>
        (await pool.query("select attempt, agent from iterations order by attempt")).rows,
    );
    expect(rows).toEqual(expected);
  });
});
