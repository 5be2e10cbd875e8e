export interface TextEdit {
  oldText: string;
  newText: string;
}

export type EditOutcome = { ok: true; text: string } | { ok: false; error: string };

/** How many times `needle` occurs in `haystack`, overlapping occurrences too (see matchesOf). */
function countOccurrences(haystack: string, needle: string): number {
  return matchesOf(
    { length: haystack.length, at: (i) => haystack.charCodeAt(i) },
    { length: needle.length, at: (j) => needle.charCodeAt(j) },
  ).count;
}

function indentOf(line: string): string {
  return /^[ \t]*/.exec(line)?.[0] ?? "";
}

/** A sequence of numbers (characters' codes, lines' ids) read by position. */
interface Sequence {
  length: number;
  at(index: number): number;
}

/**
 * How often `pattern` occurs in `text` (overlapping occurrences too) and where first, in time
 * linear in both (Knuth–Morris–Pratt): a search that compares every position with the whole
 * pattern took seconds for a file and an `oldText` of tens of thousands of alike lines (or
 * characters), and a model can send one.
 */
function matchesOf(text: Sequence, pattern: Sequence): { count: number; first: number } {
  // Counted, not listed: a 20 MB file of one character held an array of every position.
  const found = { count: 0, first: -1 };
  if (pattern.length === 0) return found;
  // fallback[j]: the length of the longest proper prefix of pattern[0..j] that is also its suffix.
  const fallback = new Uint32Array(pattern.length);
  for (let j = 1, k = 0; j < pattern.length; j++) {
    while (k > 0 && pattern.at(j) !== pattern.at(k)) k = fallback[k - 1]!;
    if (pattern.at(j) === pattern.at(k)) k++;
    fallback[j] = k;
  }
  for (let i = 0, k = 0; i < text.length; i++) {
    const c = text.at(i);
    while (k > 0 && c !== pattern.at(k)) k = fallback[k - 1]!;
    if (c === pattern.at(k)) k++;
    if (k === pattern.length) {
      if (found.count++ === 0) found.first = i - k + 1;
      k = fallback[k - 1]!;
    }
  }
  return found;
}

/** Where the lines `needle` occur among `haystack`'s, each line numbered once (see matchesOf). */
function occurrences(
  haystack: readonly string[],
  needle: readonly string[],
): { count: number; first: number } {
  const ids = new Map<string, number>();
  const idOf = (line: string) => {
    const known = ids.get(line);
    if (known !== undefined) return known;
    ids.set(line, ids.size);
    return ids.size - 1;
  };
  const pattern = needle.map(idOf);
  const text = haystack.map(idOf);
  return matchesOf(
    { length: text.length, at: (i) => text[i]! },
    { length: pattern.length, at: (j) => pattern[j]! },
  );
}

/**
 * Models often get indentation wrong: match `oldText` line by line ignoring leading and
 * trailing whitespace, and re-indent `newText` to the indentation found in the file.
 */
function replaceLoosely(content: string, edit: TextEdit, eol: string): string | number {
  const lines = content.split(eol);
  const oldLines = edit.oldText.split(eol);
  while (oldLines.length > 1 && oldLines[oldLines.length - 1]!.trim() === "") oldLines.pop();
  const found = occurrences(
    lines.map((line) => line.trim()),
    oldLines.map((line) => line.trim()),
  );
  if (found.count !== 1) return found.count;
  const start = found.first;
  const fileIndent = indentOf(lines[start]!);
  const editIndent = indentOf(oldLines[0]!);
  const newLines = edit.newText.split(eol).map((line) => {
    if (line.trim() === "") return line;
    return line.startsWith(editIndent) ? fileIndent + line.slice(editIndent.length) : line;
  });
  // A trailing newline of the edit is covered by the matched lines' own line breaks.
  if (edit.oldText.endsWith(eol) && newLines.length > 1 && newLines[newLines.length - 1] === "") {
    newLines.pop();
  }
  lines.splice(start, oldLines.length, ...newLines);
  return lines.join(eol);
}

/**
 * Applies `edits` in order. Each `oldText` must match exactly one place (exactly, or else
 * line by line ignoring indentation); otherwise nothing is applied and the error says which
 * edit failed and why. The file's line endings (LF or CRLF) are kept.
 */
export function applyTextEdits(content: string, edits: readonly TextEdit[]): EditOutcome {
  const eol = content.includes("\r\n") ? "\r\n" : "\n";
  const toFileEol = (text: string) => text.replace(/\r\n/g, "\n").replace(/\n/g, eol);
  let text = content;
  for (const [index, raw] of edits.entries()) {
    const edit = { oldText: toFileEol(raw.oldText), newText: toFileEol(raw.newText) };
    const label = `edit ${index + 1} of ${edits.length}`;
    if (edit.oldText === "") return { ok: false, error: `${label}: oldText is empty` };
    const exact = countOccurrences(text, edit.oldText);
    if (exact === 1) {
      text = text.replace(edit.oldText, () => edit.newText);
      continue;
    }
    if (exact > 1) {
      return {
        ok: false,
        error: `${label}: oldText matches ${exact} places; include more surrounding lines to make it unique`,
      };
    }
    const loose = replaceLoosely(text, edit, eol);
    if (typeof loose === "string") {
      text = loose;
      continue;
    }
    return {
      ok: false,
      error:
        loose === 0
          ? `${label}: oldText was not found in the file`
          : `${label}: oldText matches ${loose} places (ignoring indentation); include more surrounding lines to make it unique`,
    };
  }
  return { ok: true, text };
}
