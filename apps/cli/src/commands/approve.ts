import { readFileSync } from "node:fs";
import { clientFromEnv, runPath } from "../api-client";
import { fail } from "../lifecycle";

interface Answered {
  id: string;
  status: string;
}

/** `looprun approve ID [--plan FILE]`: approves the plan (FILE: JSON `{"steps": [{title, detail?}]}`). */
export async function approveCommand(id: string, opts: { plan?: string }): Promise<void> {
  let body: { plan: unknown } | undefined;
  if (opts.plan !== undefined) {
    let text: string;
    try {
      text = readFileSync(opts.plan, "utf8");
    } catch (error) {
      return fail(`cannot read --plan ${opts.plan}: ${(error as Error).message}`);
    }
    try {
      body = { plan: JSON.parse(text) };
    } catch {
      return fail(`--plan ${opts.plan} is not JSON: write {"steps": [{"title": "…"}]}`);
    }
  }
  const res = await clientFromEnv().request<Answered>(
    "POST",
    runPath(id, "/approve"),
    body,
    // A field of the file's plan is named in the file: `--plan FILE: steps.0.title`.
    { flags: opts.plan === undefined ? {} : { plan: `--plan ${opts.plan}` } },
  );
  process.stdout.write(
    `run ${res.id}: plan approved${body ? " (edited)" : ""}, ${res.status} to go on\n`,
  );
}

/** `looprun reject ID --reason TEXT`: the run ends `stopped`. */
export async function rejectCommand(id: string, opts: { reason: string }): Promise<void> {
  const res = await clientFromEnv().request<Answered>(
    "POST",
    runPath(id, "/reject"),
    { reason: opts.reason },
    { flags: { reason: "--reason" } },
  );
  process.stdout.write(`run ${res.id}: rejected, ${res.status}\n`);
}

/** `looprun reply ID MESSAGE`: answers a blocked agent; the run goes on with the answer. */
export async function replyCommand(id: string, message: string): Promise<void> {
  const res = await clientFromEnv().request<Answered>(
    "POST",
    runPath(id, "/reply"),
    { message },
    { flags: { message: "<message>" } },
  );
  process.stdout.write(`run ${res.id}: answered, ${res.status} to go on\n`);
}
