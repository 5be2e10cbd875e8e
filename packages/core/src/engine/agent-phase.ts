import { runCommandAgent } from "../agents/command-agent";
import { cutBy, runMistralAgent } from "../agents/mistral-agent";
import { tokensLeft } from "../budget/budget";
import { VAR_REFERENCE } from "../domain/literal-secrets";
import type { AgentResult, NewToolCall } from "../domain/run";
import type { MistralAgentSpec } from "../domain/run-spec";
import type { ChatModel } from "../llm/chat-model";
import { isBaseVariable } from "../process/command-env";
import { RUN_ID_VARIABLE } from "../process/orphans";
import { storedToolArguments } from "../tools/tool-arguments";
import { ToolHub } from "../tools/tool-hub";
import { workspaceCallTimeoutMs, workspaceServerLaunch } from "../tools/workspace-server-launch";
import { assertNever } from "../util/assert-never";
import { timeoutSignal } from "../util/timeout-signal";
import type { EngineResources } from "./resources";
import type { RunContext } from "./run-context";

export interface AgentPhaseInput {
  n: number;
  prompt: string;
  env: Record<string, string>;
  /** Time left before the run's deadline. */
  msLeft: () => number;
  outputCapBytes: number;
  signal: AbortSignal;
  onSpawn?: (pgid: number) => void;
}

export interface AgentPhaseResult extends AgentResult {
  /** A phase that produced no valid output (the run fails with `error`). */
  phaseFailed: { phase: string; error: string } | null;
  /** The question of a mistral agent that reported `blocked` (the run waits for a reply). */
  blocked?: string | null;
  /**
   * Whether the agent gave the run's completion promise (looked for as its output streamed,
   * the whole of it); `null` or absent when none was asked for, or no agent ran.
   */
  promiseFound?: boolean | null;
  /** A tag the agent printed that was not the run's promise (the feedback names it). */
  promiseOther?: string | null;
  /** The run's token budget ended the agent's turn before it finished. */
  budgetSpent?: boolean;
}

/**
 * `${NAME}` in an MCP server's url, env or headers takes the value of an allowed variable of
 * the worker: secrets are configured on the workers, never sent in (and stored with) a run.
 * What it puts in from an allowlisted variable is added to `secrets` — the reference is how a
 * run says "a value I must not write out", whatever the names (`GH=${GITHUB_AUTH}`): whatever
 * the server then says with it (its stderr in an error, a tool's result) is redacted. A name
 * the worker does not have (unset, or not allowed) goes to `missing`.
 */
interface Expansion {
  env: Record<string, string>;
  secrets: string[];
  missing: Set<string>;
}

function expand(value: string, x: Expansion): string {
  return value.replace(VAR_REFERENCE, (_m, name: string) => {
    const found = x.env[name];
    if (found === undefined) x.missing.add(name);
    // What every command gets anyway (HOME, PATH, LOOPRUN_RUN_ID…) is no secret: redacted, a
    // path under HOME or the run's id would be `[REDACTED]` wherever it is written.
    else if (!isBaseVariable(name)) x.secrets.push(found);
    return found ?? "";
  });
}

function expandVars(values: Record<string, string>, x: Expansion): Record<string, string> {
  return Object.fromEntries(Object.entries(values).map(([k, v]) => [k, expand(v, x)]));
}

/** An agent that could not start: the implementation phase failed, and the run with it. */
const notStarted = (error: string, durationMs = 0): AgentPhaseResult => ({
  exitCode: null,
  output: "",
  durationMs,
  phaseFailed: { phase: "implementation", error },
});

/** The longest a mistral agent's MCP servers may take to start (less when the deadline is nearer). */
const CONNECT_TIMEOUT_MS = 60_000;

/** Runs the run's agent for one iteration: a command, or the mistral agent with MCP tools. */
export async function runAgentPhase(
  res: EngineResources,
  ctx: RunContext,
  input: AgentPhaseInput,
): Promise<AgentPhaseResult> {
  const { spec } = ctx.run;
  const agent = spec.agent;
  switch (agent.type) {
    case "command": {
      const r = await runCommandAgent({
        spec: agent,
        prompt: input.prompt,
        workspace: ctx.run.workspace,
        env: input.env,
        budgetMs: Math.max(1, input.msLeft()),
        outputCapBytes: input.outputCapBytes,
        signal: input.signal,
        promptFile: ctx.promptFile(),
        completionPromise: spec.completionPromise,
        ...(input.onSpawn ? { onSpawn: input.onSpawn } : {}),
      });
      return {
        exitCode: r.exitCode,
        output: r.output,
        durationMs: r.durationMs,
        phaseFailed: null,
        promiseFound: r.promiseFound,
        promiseOther: r.promiseOther,
      };
    }
    case "mistral": {
      if (!res.llm) {
        return notStarted("no LLM is configured: set MISTRAL_API_KEY for the workers");
      }
      // The agent's own timer: the run's deadline also ends its calls.
      const timed = timeoutSignal(input.signal, Math.max(1, input.msLeft()));
      try {
        return await runMistralPhase(res, res.llm, ctx, input, { agent, signal: timed.signal });
      } finally {
        timed.clear();
      }
    }
    default:
      return assertNever(agent);
  }
}

/** The mistral agent's turn: its tool servers, started for it, and the model's calls. */
async function runMistralPhase(
  res: EngineResources,
  llm: ChatModel,
  ctx: RunContext,
  input: AgentPhaseInput,
  { agent, signal }: { agent: MistralAgentSpec; signal: AbortSignal },
): Promise<AgentPhaseResult> {
  const { spec } = ctx.run;
  const started = performance.now();
  const x: Expansion = { env: input.env, secrets: [], missing: new Set() };
  const servers = spec.mcpServers.map((s) =>
    "url" in s
      ? { ...s, url: expand(s.url, x), headers: expandVars(s.headers, x) }
      : {
          ...s,
          // The run's mark: a worker killed with -9 leaves a server that does not exit on its
          // own running, and the run's next step kills what carries it (killOrphanedGroup).
          env: { ...expandVars(s.env, x), [RUN_ID_VARIABLE]: ctx.run.id },
          cwd: ctx.run.workspace,
        },
  );
  ctx.keepSecrets(x.secrets);
  if (x.missing.size > 0) {
    // An empty token would fail later, and less clearly (a 401 from the server, or worse).
    const names = [...x.missing].map((n) => `\${${n}}`).join(", ");
    return notStarted(
      `MCP servers could not start: ${names} names no variable of the workers (unset, or not in AGENT_ENV_ALLOWLIST)`,
    );
  }
  let hub: ToolHub;
  try {
    hub = await ToolHub.connect(
      [
        {
          name: "workspace",
          ...workspaceServerLaunch(ctx.run.workspace, input.env),
          cwd: ctx.run.workspace,
        },
        ...servers,
      ],
      {
        reservedNames: ["finish", "update_step"],
        // Longer than a command's own timeout and kill: it times out on the server, which
        // reports it with its output, not on the client, which would lose that.
        requestTimeoutMs: res.toolTimeoutMs ?? workspaceCallTimeoutMs(),
        // A stop or the deadline ends the start-up too (a server may take a minute).
        signal,
        connectTimeoutMs: Math.max(1, Math.min(CONNECT_TIMEOUT_MS, input.msLeft())),
      },
    );
  } catch (error) {
    const durationMs = Math.round(performance.now() - started);
    // Cut by a stop or the deadline while its servers started: a killed agent, as one cut
    // during a model call is, not a failed phase.
    if (signal.aborted) {
      return {
        exitCode: null,
        output: `[looprun] killed: ${cutBy(signal.reason)} (its tool servers were starting)`,
        durationMs,
        phaseFailed: null,
      };
    }
    return notStarted(`MCP servers could not start: ${(error as Error).message}`, durationMs);
  }
  try {
    const r = await runMistralAgent({
      llm,
      model: agent.model ?? res.defaultModel ?? "mistral-large-latest",
      ...(agent.temperature !== undefined ? { temperature: agent.temperature } : {}),
      maxToolCalls: agent.maxToolCalls,
      planning: agent.plan,
      plan: ctx.run.plan,
      toolSet: hub,
      prompt: input.prompt,
      signal,
      tokensLeft: () => tokensLeft(ctx.run),
      outputCapBytes: input.outputCapBytes,
      redact: (text) => ctx.redact(text),
      completionPromise: spec.completionPromise,
      recorder: {
        toolCall: async (call) => {
          const record: NewToolCall = {
            iteration: input.n,
            ...call,
            args: storedToolArguments(call.args),
          };
          await ctx.commit(
            {
              metrics: {
                ...ctx.run.metrics,
                toolCalls: ctx.run.metrics.toolCalls + 1,
                toolFailures: ctx.run.metrics.toolFailures + (call.isError ? 1 : 0),
              },
              // The agent's own tools have no server.
              progress: `iteration ${input.n}/${spec.maxIterations}: ${call.server ? `${call.server}.` : ""}${call.tool}`,
            },
            [
              [
                "tool_called",
                {
                  iteration: input.n,
                  server: call.server,
                  tool: call.tool,
                  isError: call.isError,
                  durationMs: call.durationMs,
                },
              ],
            ],
            { toolCalls: [record] },
          );
        },
        tokens: async (count) => {
          await ctx.commit({
            metrics: { ...ctx.run.metrics, tokens: ctx.run.metrics.tokens + count },
          });
        },
        plan: async (type, plan, data = {}) => {
          await ctx.commit({ plan }, [
            [type, { iteration: input.n, version: plan.version, ...data, plan }],
          ]);
        },
      },
    });
    return {
      exitCode: r.exitCode,
      output: r.output,
      // The whole phase, as for a command agent: its tool servers' start-up included.
      durationMs: Math.round(performance.now() - started),
      phaseFailed: r.phaseFailed,
      blocked: r.blocked,
      promiseFound: r.promiseFound,
      promiseOther: r.promiseOther,
      budgetSpent: r.budgetSpent,
    };
  } finally {
    await hub.close();
  }
}
