import { Command } from "commander";
import cliPackage from "../package.json" with { type: "json" };
import { approveCommand, rejectCommand, replyCommand } from "./commands/approve";
import { gcCommand } from "./commands/gc";
import { mcpCommand } from "./commands/mcp";
import {
  lsCommand,
  rollbackCommand,
  showCommand,
  stopCommand,
  submitCommand,
  watchCommand,
} from "./commands/runs";
import { apiCommand, devCommand, workerCommand } from "./commands/servers";
import { DEFAULT_API_URL } from "./env";
import { fail } from "./lifecycle";

const collect = (value: string, previous: string[] = []) => [...previous, value];

// A reader that went away (`looprun watch ID | head -1`) ends a client command as it would end
// a C program, killed by SIGPIPE (128 + 13), without a stack trace. Node ignores SIGPIPE itself.
// A server (`looprun dev | head -3`) goes on without its output: exiting there would skip its
// shutdown, leaving its Redis, workers and their commands behind.
const SERVING = ["dev", "api", "worker"].includes(process.argv[2] ?? "");
for (const stream of [process.stdout, process.stderr]) {
  stream.on("error", (error: NodeJS.ErrnoException) => {
    if (error.code !== "EPIPE") throw error;
    if (!SERVING) process.exit(141);
  });
}

const program = new Command("looprun")
  .description("Self-correcting agent loops as durable jobs")
  .version(cliPackage.version, "-V, --version", "print looprun's version")
  .showHelpAfterError()
  .addHelpText(
    "after",
    `
Talking to the API (submit, watch, ls, show, stop, rollback, approve, reject, reply):
  LOOPRUN_URL  the API's address (default ${DEFAULT_API_URL})
  API_TOKEN    the API's token, sent as a bearer token: needed when the API
               has one (the API answers 401 unauthorized without it)

dev, api, worker and gc read their settings (PORT, HOST, REDIS_URL, DATABASE_PATH…)
from the environment too: see "Configuration" in the README.`,
  );

program
  .command("dev")
  .description("start everything locally: redis-server (managed), API and workers")
  .action(devCommand);
program.command("api").description("start the HTTP API").action(apiCommand);
program.command("worker").description("start a worker process").action(workerCommand);
program
  .command("submit")
  .description("submit a run (the command agent)")
  .requiredOption("-t, --task <text>", "what the agent must do")
  .requiredOption("-a, --agent <command>", 'the agent command, e.g. "claude -p"')
  .option("--agent-timeout <ms>", "timeout of one agent run")
  .option("-s, --session <id>", "session id (default: a new session)")
  .option("-w, --workspace <dir>", "workspace under WORKSPACES_ROOT")
  .option("--test <command>", "test command that must pass")
  .option("--validate <command>", "validation command (repeatable)", collect)
  .option("--promise <text>", "completion promise the agent must print as <promise>TEXT</promise>")
  .option("--requirements <text>", "requirements given to the agent")
  .option("--file <path>", "focus file (repeatable)", collect)
  .option("--max-iterations <n>", "iteration budget (default 6)")
  .option("--max-minutes <n>", "time budget in minutes (default 45)")
  .option("--cooldown <ms>", "pause between iterations (default 1000)")
  .option("--success-threshold <t>", "fraction of validation commands that must pass (default 1)")
  .option("--max-stalled <n>", "iterations in a row without progress before `stalled` (default 3)")
  .option("--rollback-on-failure", "restore the workspace as it was before the run if it fails")
  .option("--watch", "print progress until the run ends")
  .option(
    "--json",
    "print the created run as JSON (with --watch: then the ended run; progress on stderr)",
  )
  .action(submitCommand);
program.command("watch <id>").description("follow a run until it ends").action(watchCommand);
program
  .command("ls")
  .description("list runs, newest first")
  .option("-s, --session <id>", "only this session")
  .option("--status <status>", "only this status")
  .option("-n, --limit <n>", "page size (default 20)")
  .option("--cursor <cursor>", "next page")
  .action(lsCommand);
program.command("show <id>").description("show a run and its iterations").action(showCommand);
program.command("stop <id>").description("stop a run").action(stopCommand);
program
  .command("rollback <id>")
  .description("restore the run's workspace to the snapshot after an iteration (0: before the run)")
  .requiredOption("-i, --iteration <n>", "the iteration whose snapshot to restore")
  .action(rollbackCommand);
program
  .command("approve <id>")
  .description("approve the plan of a run awaiting approval; it goes on")
  .option("--plan <file>", 'an edited plan instead: JSON {"steps": [{"title", "detail"?}]}')
  .action(approveCommand);
program
  .command("reject <id>")
  .description("reject the plan (or the question) of a run awaiting approval; it ends stopped")
  .requiredOption("-r, --reason <text>", "why (kept as the run's summary)")
  .action(rejectCommand);
program
  .command("reply <id> <message>")
  .description("answer a blocked agent's question; the run goes on with the answer as feedback")
  .action(replyCommand);
program.addCommand(mcpCommand());
program
  .command("gc")
  .description(
    "remove the snapshot refs and objects no run of the database needs (API and workers stopped)",
  )
  .option("-n, --dry-run", "count what would be removed; remove nothing")
  .option(
    "--force",
    "go on although a writer's file is there (one of another host), or no run the refs name is in the database",
  )
  .action(gcCommand);

program
  .parseAsync(process.argv)
  .catch((error: unknown) => fail(error instanceof Error ? error.message : String(error)));
