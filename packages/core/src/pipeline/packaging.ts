import type { RunChange } from "../domain/snapshots";

/** The packaging phase's artifact: the files changed, the diff stat and the patch. */
export function packageChange(change: RunChange | null): string {
  if (change === null)
    return "No snapshot of the workspace was taken: there is no change to package.\n";
  const files = change.files.length === 0 ? "(none)" : change.files.map((f) => `- ${f}`).join("\n");
  const patch =
    change.patch === null
      ? `(the patch is ${change.patchBytes} bytes, more than is stored; see the snapshots ${change.baselineSnapshot}..${change.headSnapshot})`
      : change.patch.length === 0
        ? "(empty: nothing changed)"
        : `\`\`\`diff\n${change.patch}\`\`\``;
  return [
    `# Change of run ${change.runId}`,
    `Snapshots: ${change.baselineSnapshot} (baseline) → ${change.headSnapshot} (iteration ${change.iteration})`,
    `## Files changed (${change.files.length})\n\n${files}`,
    `## Diff stat\n\n${change.stat.trimEnd() || "(no change)"}`,
    `## Patch\n\n${patch}`,
  ]
    .join("\n\n")
    .concat("\n");
}
