import { MAX_PATTERNS_PER_WORKSPACE, type ValidationResult } from "@looprun/core";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { iteration } from "./store-fixtures";
import type { StoreHarness } from "./store-harness";
import { newRun } from "./support";

const check = (command: string, exitCode: number, output = ""): ValidationResult => ({
  command,
  exitCode,
  durationMs: 10,
  output,
});

/** Learning across runs: what commits fold into the workspace's failure patterns. */
export function failurePatternSuite(engine: string, open: () => Promise<StoreHarness>): void {
  let h: StoreHarness;
  beforeEach(async () => {
    h = await open();
  });
  afterEach(async () => {
    await h.close();
  });

  describe(`${engine}: failure patterns`, () => {
    it("counts tool calls per tool, argument shape and error kind, newest errors first, exactly once per commit", async () => {
      const run = await h.createRun(newRun({}, { workspace: "/tmp/ws-learn-a" }));
      const { epoch } = (await h.store.claimRun(run.id))!.run;
      const call = (isError: boolean, result: string, args: unknown) => ({
        iteration: 1,
        server: "workspace",
        tool: "read_text_file",
        args,
        isError,
        result,
        durationMs: 4,
      });
      await h.store.commit(
        run.id,
        epoch,
        {
          toolCalls: [
            call(true, "ENOENT: a.txt", { path: "a.txt" }),
            call(false, "hello", { path: "b.txt" }),
          ],
        },
        1000,
      );
      await h.store.commit(
        run.id,
        epoch,
        { toolCalls: [call(true, "ENOENT: c.txt", { path: "c.txt" })] },
        2000,
      );
      // A different shape is a different approach.
      await h.store.commit(
        run.id,
        epoch,
        { toolCalls: [call(false, "ok", { path: "d.txt", head: 3 })] },
        3000,
      );
      const patterns = await h.store.failurePatterns("/tmp/ws-learn-a", 10);
      expect(patterns).toHaveLength(3);
      // Failures are kept apart from the shape's successes, by error kind (the path left out).
      expect(patterns[0]).toEqual({
        scope: "tool",
        workspace: "/tmp/ws-learn-a",
        subject: "workspace.read_text_file",
        shape: "{path:string} ! ENOENT: <path>",
        successes: 0,
        failures: 2,
        totalDurationMs: 8,
        lastErrors: ["ENOENT: c.txt", "ENOENT: a.txt"],
        lastRunId: run.id,
        lastSeenAt: 2000,
      });
      expect(patterns.slice(1).map((p) => [p.shape, p.successes, p.failures])).toEqual([
        ["{head:number,path:string}", 1, 0],
        ["{path:string}", 1, 0],
      ]);
      // Other workspaces learn nothing from it.
      expect(await h.store.failurePatterns("/tmp/ws-learn-other", 10)).toEqual([]);
    });

    it("records the validation commands of a decided iteration, not of one still running", async () => {
      const run = await h.createRun(newRun({}, { workspace: "/tmp/ws-learn-b" }));
      const { epoch } = (await h.store.claimRun(run.id))!.run;
      await h.store.commit(run.id, epoch, { insertIteration: iteration(run.id, 1, 1) }, 1000);
      // Validation results written while the iteration runs are not a decision yet.
      await h.store.commit(
        run.id,
        epoch,
        { updateIteration: { n: 1, attempt: 1, patch: { validation: [check("npm test", 1)] } } },
        1100,
      );
      expect(await h.store.failurePatterns("/tmp/ws-learn-b", 10)).toEqual([]);
      const decide = (n: number, output: string, at: number) =>
        h.store.commit(
          run.id,
          epoch,
          {
            updateIteration: {
              n,
              attempt: 1,
              patch: {
                status: "failed",
                outcome: "validation_failed",
                validation: [check("npm test", 1, output), check("npm run lint", 0)],
              },
            },
          },
          at,
        );
      await decide(1, "2 failing: cart total", 1200);
      await h.store.commit(run.id, epoch, { insertIteration: iteration(run.id, 2, 1) }, 1300);
      await decide(2, "1 failing: cart total", 1400);
      const patterns = await h.store.failurePatterns("/tmp/ws-learn-b", 10);
      expect(patterns.map((p) => [p.scope, p.subject, p.successes, p.failures])).toEqual([
        ["command", "npm test", 0, 2],
        ["command", "npm run lint", 2, 0],
      ]);
      expect(patterns[0]?.lastErrors).toEqual([
        "exit 1: 1 failing: cart total",
        "exit 1: 2 failing: cart total",
      ]);
    });

    it("stores the patterns of a 4,000-character command and of a call with 300 argument names, keyed by their start and a digest", async () => {
      // Incompressible: PostgreSQL's index entries are at most 2,704 bytes.
      const noise = (n: number, from: number) =>
        Array.from({ length: n }, (_, i) => String.fromCodePoint(from + ((i * 7919) % 20000))).join(
          "",
        );
      const long = `true # ${noise(3990, 0x4e00)}`;
      const longToo = `${long.slice(0, -1)}x`;
      const wide = Object.fromEntries(
        Array.from({ length: 300 }, (_, i) => [`k${(i * 2654435761).toString(16)}`, "v"]),
      );
      const workspace = `/tmp/${"w".repeat(1000)}`;
      const run = await h.createRun(newRun({ testCommand: long }, { workspace }));
      const { epoch } = (await h.store.claimRun(run.id))!.run;
      await h.store.commit(
        run.id,
        epoch,
        {
          insertIteration: iteration(run.id, 1, 1),
          toolCalls: [
            {
              iteration: 1,
              server: "workspace",
              tool: "write_file",
              args: wide,
              isError: false,
              result: "ok",
              durationMs: 1,
            },
          ],
        },
        1000,
      );
      await h.store.commit(
        run.id,
        epoch,
        {
          updateIteration: {
            n: 1,
            attempt: 1,
            patch: {
              status: "failed",
              outcome: "validation_failed",
              validation: [check(long, 1), check(longToo, 0)],
            },
          },
        },
        1100,
      );
      const patterns = await h.store.failurePatterns(workspace, 10);
      const commands = patterns.filter((p) => p.scope === "command");
      // Two commands alike but for their last character are two patterns.
      expect(commands.map((p) => [p.failures, p.successes])).toEqual(
        expect.arrayContaining([
          [1, 0],
          [0, 1],
        ]),
      );
      for (const p of patterns) {
        expect(Buffer.byteLength(p.subject)).toBeLessThanOrEqual(400);
        expect(Buffer.byteLength(p.shape)).toBeLessThanOrEqual(400);
      }
      expect(commands[0]?.subject.startsWith("true # ")).toBe(true);
      expect(commands[0]?.subject).toMatch(/…#[0-9a-f]{12}$/);
      expect(patterns.find((p) => p.scope === "tool")?.shape).toMatch(/^\{k.*…#[0-9a-f]{12}$/);
    });

    it("keys run_command by its command, and chooses what worked apart from what failed", async () => {
      const ws = "/tmp/ws-learn-d";
      const run = await h.createRun(newRun({}, { workspace: ws }));
      const { epoch } = (await h.store.claimRun(run.id))!.run;
      const command = (cmd: string, ok: boolean) => ({
        iteration: 1,
        server: "workspace",
        tool: "run_command",
        args: { command: cmd },
        isError: !ok,
        result: ok ? "exit code 0" : "exit code 1",
        durationMs: 1,
      });
      // Six commands that always fail (more than the limit), and one that works.
      const failing = ["a", "b", "c", "d", "e", "f"].map((x) => command(`false ${x}`, false));
      await h.store.commit(
        run.id,
        epoch,
        { toolCalls: [...failing, ...failing, command("npm  test", true)] },
        1000,
      );
      const patterns = await h.store.failurePatterns(ws, 5);
      expect(patterns.filter((p) => p.failures > 0)).toHaveLength(5);
      expect(patterns.find((p) => p.successes > 0)).toMatchObject({
        subject: "workspace.run_command",
        shape: "$ npm test",
        successes: 1,
        failures: 0,
      });
    });

    it("keeps a workspace's most recently seen patterns up to the cap", async () => {
      const ws = "/tmp/ws-learn-cap";
      const run = await h.createRun(newRun({}, { workspace: ws }));
      const { epoch } = (await h.store.claimRun(run.id))!.run;
      const failed = (command: string) => ({
        iteration: 1,
        server: "workspace",
        tool: "run_command",
        args: { command },
        isError: true,
        result: "exit code 1",
        durationMs: 1,
      });
      await h.store.commit(run.id, epoch, { toolCalls: [failed("make old")] }, 1000);
      const fresh = Array.from({ length: MAX_PATTERNS_PER_WORKSPACE }, (_, i) =>
        failed(`make ${i}`),
      );
      await h.store.commit(run.id, epoch, { toolCalls: fresh }, 2000);
      const kept = await h.store.failurePatterns(ws, 2 * MAX_PATTERNS_PER_WORKSPACE);
      expect(kept).toHaveLength(MAX_PATTERNS_PER_WORKSPACE);
      expect(kept.map((p) => p.shape)).not.toContain("$ make old");
    });

    it("learns nothing from a fenced-off commit", async () => {
      const run = await h.createRun(newRun({}, { workspace: "/tmp/ws-learn-c" }));
      const { epoch } = (await h.store.claimRun(run.id))!.run;
      await h.store.claimRun(run.id);
      await expect(
        h.store.commit(
          run.id,
          epoch,
          {
            toolCalls: [
              {
                iteration: 1,
                server: "workspace",
                tool: "run_command",
                args: { command: "make" },
                isError: true,
                result: "make: no rule",
                durationMs: 1,
              },
            ],
          },
          1000,
        ),
      ).rejects.toThrow();
      expect(await h.store.failurePatterns("/tmp/ws-learn-c", 10)).toEqual([]);
    });
  });
}
