import { stripVTControlCharacters } from "node:util";

/** C0 controls (but tab and newline) and DEL: nothing a model reads, some a vendor refuses. */
// biome-ignore lint/suspicious/noControlCharactersInRegex: matching control characters is its purpose
const CONTROLS = /[\u0000-\u0008\u000b-\u001f\u007f]/g;

/**
 * Command output as a model should read it: without terminal colours and cursor moves
 * (`\x1b[31m`), each line as a terminal last showed it (a progress bar's `10%\r20%\r100%` is
 * `100%`; a `\r\n` line end is a line end) and without other control bytes (a NUL). What is
 * stored is left as written; this is for prompts and tool results.
 */
export function forPrompt(text: string): string {
  let out = text;
  if (out.includes("\x1b") || out.includes("\x9b")) out = stripVTControlCharacters(out);
  if (out.includes("\r")) out = out.split("\n").map(lastShown).join("\n");
  return out.replace(CONTROLS, "");
}

function lastShown(line: string): string {
  const parts = line.split("\r");
  for (let i = parts.length - 1; i >= 0; i--) {
    if (parts[i] !== "") return parts[i] as string;
  }
  return "";
}
