import { existsSync, mkdirSync, renameSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import {
  type CappedText,
  CHANGE_DIFF_OPTIONS,
  capDiff,
  capped,
  parseChangeOutput,
  type SnapshotChange,
} from "./change-output";
import type { WorkspaceSnapshots } from "./workspace-snapshots";

/** How the patches are asked for: `git apply` takes them (binary files too). */
const DIFF = ["diff", "--binary", "--no-color", "--no-ext-diff"];

/**
 * The change from one snapshot to another: the paths it touches, git's `--stat` and the
 * patch (`git diff --binary`, capped) — from one git process (see change-output.ts).
 */
export async function snapshotChange(
  snapshots: WorkspaceSnapshots,
  sessionId: string,
  from: string,
  to: string,
  patchCapBytes: number,
  signal?: AbortSignal,
): Promise<SnapshotChange> {
  // Room for the file list and the stat ahead of the patch.
  const headroom = 1024 * 1024;
  const result = await snapshots.gitIn(
    sessionId,
    null,
    ["diff", ...CHANGE_DIFF_OPTIONS, from, to],
    signal,
    { maxStdoutBytes: patchCapBytes + headroom },
  );
  const parsed = parseChangeOutput(result.stdoutRaw, result.truncated);
  if (parsed === null) {
    const [patch, summary] = await Promise.all([
      snapshotDiff(snapshots, sessionId, from, to, patchCapBytes, signal),
      changeSummary(snapshots, sessionId, from, to, signal),
    ]);
    return { ...summary, patch };
  }
  const patchBytes = result.stdoutBytes - parsed.patchOffset;
  const patch = capDiff(result.stdoutRaw.subarray(parsed.patchOffset), patchBytes, patchCapBytes);
  return {
    files: parsed.files,
    stat: parsed.stat,
    patch: await diffAsText(snapshots, patch, sessionId, from, to, patchCapBytes, signal),
  };
}

/** `git diff --binary from to`: a patch `git apply` applies to `from`'s files. */
export async function snapshotDiff(
  snapshots: WorkspaceSnapshots,
  sessionId: string,
  from: string,
  to: string,
  capBytes: number,
  signal?: AbortSignal,
): Promise<CappedText> {
  const plain = capped(
    await snapshots.gitIn(sessionId, null, [...DIFF, from, to], signal, {
      maxStdoutBytes: capBytes,
    }),
  );
  return diffAsText(snapshots, plain, sessionId, from, to, capBytes, signal);
}

/**
 * A diff (`from` → `to`) as text that `git apply` turns back into the same files: `diff` as
 * git printed it, unless it holds bytes that are not UTF-8 (`lossy`: patches are kept as
 * text, and those bytes became U+FFFD). Then git is asked again: names quoted as git quotes
 * them (`"caf\351.txt"`, which `git apply` reads back), and, when contents still are not
 * UTF-8, every file as a binary patch (base 85).
 */
export async function diffAsText(
  snapshots: WorkspaceSnapshots,
  diff: CappedText,
  sessionId: string,
  from: string,
  to: string,
  capBytes: number,
  signal?: AbortSignal,
): Promise<CappedText> {
  if (!diff.lossy) return diff;
  const git = async (args: string[]) =>
    capped(await snapshots.gitIn(sessionId, null, args, signal, { maxStdoutBytes: capBytes }));
  const quoted = ["-c", "core.quotePath=true", ...DIFF, from, to];
  const named = await git(quoted);
  if (!named.lossy) return named;
  return git(["-c", `core.attributesFile=${binaryAttributes(snapshots.root)}`, ...quoted]);
}

/** An attributes file that makes every file binary to `git diff` (see diffAsText). */
function binaryAttributes(root: string): string {
  const file = join(root, "all-binary.attributes");
  if (!existsSync(file)) {
    mkdirSync(root, { recursive: true });
    const tmp = `${file}.${process.pid}.tmp`;
    writeFileSync(tmp, "* -diff\n");
    renameSync(tmp, file);
  }
  return file;
}

/** Paths changed between two snapshots, and git's `--stat` of it. */
async function changeSummary(
  snapshots: WorkspaceSnapshots,
  sessionId: string,
  from: string,
  to: string,
  signal?: AbortSignal,
): Promise<{ files: string[]; stat: string }> {
  const [names, stat] = await Promise.all([
    snapshots.gitIn(
      sessionId,
      null,
      ["diff", "--name-only", "-z", "--no-renames", from, to],
      signal,
    ),
    snapshots.gitIn(sessionId, null, ["diff", "--stat=200", "--no-color", from, to], signal, {
      maxStdoutBytes: 256 * 1024,
    }),
  ]);
  return { files: names.stdout.split("\0").filter((f) => f.length > 0), stat: stat.stdout };
}
