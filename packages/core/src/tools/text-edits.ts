export interface TextEdit {
  oldText: string;
  newText: string;
}

export type EditOutcome = { ok: true; text: string } | { ok: false; error: string };

function countOccurrences(haystack: string, needle: string): number {
  let count = 0;
  for (let at = haystack.indexOf(needle); at !== -1; at = haystack.indexOf(needle, at + 1)) {
    count++;
  }
  return count;
}

function indentOf(line: string): string {
  return /^[ \t]*/.exec(line)?.[0] ?? "";
}

/**
 * Models often get indentation wrong: match `oldText` line by line ignoring leading and
 * trailing whitespace, and re-indent `newText` to the indentation found in the file.
 */
function replaceLoosely(content: string, edit: TextEdit, eol: string): string | number {
  const lines = content.split(eol);
  const oldLines = edit.oldText.split(eol);
  while (oldLines.length > 1 && oldLines[oldLines.length - 1]!.trim() === "") oldLines.pop();
  const starts: number[] = [];
  for (let i = 0; i + oldLines.length <= lines.length; i++) {
    if (oldLines.every((old, j) => old.trim() === lines[i + j]!.trim())) starts.push(i);
  }
  if (starts.length !== 1) return starts.length;
  const start = starts[0]!;
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
