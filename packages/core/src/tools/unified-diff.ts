const CONTEXT_LINES = 3;
/** Above this many cells the LCS table costs too much: the changed middle becomes one block. */
const MAX_LCS_CELLS = 4_000_000;

type Op = { kind: " " | "-" | "+"; line: string };

/** Lines with their terminators, so that a missing final newline is a difference too. */
function splitLines(text: string): string[] {
  const lines = text.split(/(?<=\n)/);
  return lines[lines.length - 1] === "" ? lines.slice(0, -1) : lines;
}

function middleOps(a: string[], b: string[]): Op[] {
  const n = a.length;
  const m = b.length;
  if (n * m > MAX_LCS_CELLS) {
    return [
      ...a.map((line): Op => ({ kind: "-", line })),
      ...b.map((line): Op => ({ kind: "+", line })),
    ];
  }
  // lcs[i][j]: length of the longest common subsequence of a[i..] and b[j..].
  const lcs = Array.from({ length: n + 1 }, () => new Uint32Array(m + 1));
  for (let i = n - 1; i >= 0; i--) {
    for (let j = m - 1; j >= 0; j--) {
      lcs[i]![j] =
        a[i] === b[j] ? lcs[i + 1]![j + 1]! + 1 : Math.max(lcs[i + 1]![j]!, lcs[i]![j + 1]!);
    }
  }
  const ops: Op[] = [];
  let i = 0;
  let j = 0;
  while (i < n && j < m) {
    if (a[i] === b[j]) {
      ops.push({ kind: " ", line: a[i]! });
      i++;
      j++;
    } else if (lcs[i + 1]![j]! >= lcs[i]![j + 1]!) {
      ops.push({ kind: "-", line: a[i++]! });
    } else {
      ops.push({ kind: "+", line: b[j++]! });
    }
  }
  while (i < n) ops.push({ kind: "-", line: a[i++]! });
  while (j < m) ops.push({ kind: "+", line: b[j++]! });
  return ops;
}

function diffOps(a: string[], b: string[]): Op[] {
  let start = 0;
  while (start < a.length && start < b.length && a[start] === b[start]) start++;
  let endA = a.length;
  let endB = b.length;
  while (endA > start && endB > start && a[endA - 1] === b[endB - 1]) {
    endA--;
    endB--;
  }
  return [
    ...a.slice(0, start).map((line): Op => ({ kind: " ", line })),
    ...middleOps(a.slice(start, endA), b.slice(start, endB)),
    ...a.slice(endA).map((line): Op => ({ kind: " ", line })),
  ];
}

function formatLine(op: Op): string {
  return op.line.endsWith("\n")
    ? `${op.kind}${op.line}`
    : `${op.kind}${op.line}\n\\ No newline at end of file\n`;
}

function range(start: number, count: number): string {
  // A hunk that covers no line of a side names the line before it (GNU diff's convention).
  const first = count === 0 ? start - 1 : start;
  return count === 1 ? `${first}` : `${first},${count}`;
}

/** A unified diff (`--- a/path`, `+++ b/path`, 3 lines of context); empty when the texts are equal. */
export function unifiedDiff(before: string, after: string, path: string): string {
  if (before === after) return "";
  const ops = diffOps(splitLines(before), splitLines(after));
  const changed = ops.flatMap((op, index) => (op.kind === " " ? [] : [index]));
  let out = `--- a/${path}\n+++ b/${path}\n`;
  let k = 0;
  while (k < changed.length) {
    const from = Math.max(0, changed[k]! - CONTEXT_LINES);
    let last = changed[k]!;
    // Changes closer than twice the context share one hunk.
    while (k + 1 < changed.length && changed[k + 1]! - last <= 2 * CONTEXT_LINES) {
      k++;
      last = changed[k]!;
    }
    k++;
    const to = Math.min(ops.length, last + CONTEXT_LINES + 1);
    let oldLine = 1;
    let newLine = 1;
    for (const op of ops.slice(0, from)) {
      if (op.kind !== "+") oldLine++;
      if (op.kind !== "-") newLine++;
    }
    const hunk = ops.slice(from, to);
    const oldCount = hunk.filter((op) => op.kind !== "+").length;
    const newCount = hunk.filter((op) => op.kind !== "-").length;
    out += `@@ -${range(oldLine, oldCount)} +${range(newLine, newCount)} @@\n`;
    out += hunk.map(formatLine).join("");
  }
  return out;
}
