/** What the submit form holds; the page's script turns it into a POST /api/runs body. */
export interface FormValues {
  task: string;
  sessionId?: string;
  workspace?: string;
  testCommand?: string;
  /** One command a line. */
  validationCommands?: string;
  agentType: "command" | "mistral";
  agentCommand?: string;
  agentModel?: string;
  reviewType: "none" | "command" | "mistral" | "triangular";
  reviewCommand?: string;
  maxIterations?: number;
  maxMinutes?: number;
  /** The legacy alias of maxIterations. */
  maxAttempts?: number;
  cooldownMs?: number;
}

export interface Preset {
  id: string;
  label: string;
  note: string;
  values: FormValues;
}

const counterAgent =
  'n=$(cat count 2>/dev/null || echo 0); echo $((n+1)) > count; echo "count is now $((n+1))"';
const approve = `cat > /dev/null; echo '{"blockingIssues":[],"nonBlockingIssues":["add a unit test"],"score":92,"fixPlan":[]}'`;
const block = `echo '{"blockingIssues":["add() ignores non-numbers"],"nonBlockingIssues":[],"score":40,"fixPlan":["validate the arguments of add()"]}'`;
const sendBackOnce = `cat > /dev/null; r=$(cat .review-rounds 2>/dev/null || echo 0); echo $((r+1)) > .review-rounds; if [ "$r" -eq 0 ]; then ${block}; else echo '{"blockingIssues":[],"nonBlockingIssues":[],"score":88,"fixPlan":[]}'; fi`;
const addAgent = "echo 'export const add = (a, b) => a + b;' > add.js";

/** The demo scenarios of the submit form. Reviewer ones need the reviewers of issue #4. */
export const PRESETS: Preset[] = [
  {
    id: "recovers",
    label: "Validation fails then recovers",
    note: "The agent bumps a counter; the test passes once it reaches 3 (iteration 3).",
    values: {
      task: "Count to three",
      agentType: "command",
      agentCommand: counterAgent,
      testCommand: 'test "$(cat count)" -ge 3 || { echo "count is $(cat count), want 3"; exit 1; }',
      reviewType: "none",
      maxIterations: 5,
      maxMinutes: 5,
      cooldownMs: 500,
    },
  },
  {
    id: "time-budget",
    label: "Time budget runs out",
    note: "The agent sleeps 30 s; the run has 6 seconds (0.1 minute) and ends max_minutes.",
    values: {
      task: "Take too long",
      agentType: "command",
      agentCommand: "sleep 30",
      testCommand: "true",
      reviewType: "none",
      maxIterations: 3,
      maxMinutes: 0.1,
      cooldownMs: 0,
    },
  },
  {
    id: "legacy-max-attempts",
    label: "Legacy maxAttempts input",
    note: "Budget given as maxAttempts (the legacy alias of maxIterations); passes on attempt 2.",
    values: {
      task: "Try twice",
      agentType: "command",
      agentCommand: "echo attempt >> attempts.log",
      testCommand:
        'test "$(wc -l < attempts.log)" -ge 2 || { echo "only $(wc -l < attempts.log) attempt(s)"; exit 1; }',
      reviewType: "none",
      maxAttempts: 3,
      cooldownMs: 0,
    },
  },
  {
    id: "review-approved",
    label: "Review approved",
    note: "A command reviewer approves the first change (score 92, one non-blocking issue).",
    values: {
      task: "Write add()",
      agentType: "command",
      agentCommand: addAgent,
      testCommand: "test -s add.js",
      reviewType: "command",
      reviewCommand: approve,
      maxIterations: 3,
      cooldownMs: 0,
    },
  },
  {
    id: "review-sends-back",
    label: "Review sends it back once",
    note: "The reviewer blocks the first change with a fix plan, then approves.",
    values: {
      task: "Write add() that checks its arguments",
      agentType: "command",
      agentCommand: addAgent,
      testCommand: "test -s add.js",
      reviewType: "command",
      reviewCommand: sendBackOnce,
      maxIterations: 4,
      cooldownMs: 500,
    },
  },
  {
    id: "persistent-blocking",
    label: "Persistent blocking until the iteration budget runs out",
    note: "The reviewer always blocks; the run ends max_iterations after 3 iterations.",
    values: {
      task: "Satisfy a reviewer who is never satisfied",
      agentType: "command",
      agentCommand: addAgent,
      testCommand: "test -s add.js",
      reviewType: "command",
      reviewCommand: `cat > /dev/null; ${block}`,
      maxIterations: 3,
      cooldownMs: 0,
    },
  },
];
