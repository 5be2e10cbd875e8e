import type { Context } from "hono";

/** Characters of JSON per piece: well under V8's large-object size (128 KiB). */
export const PIECE_CHARS = 16 * 1024;

/**
 * `c.json(value)` for an answer that may be large (a page of 1000 events, 100 runs, a session's
 * runs): the same bytes, without ever holding the whole body as one string.
 *
 * `JSON.stringify` of a large value builds its result from parts; the first read of it (Node's
 * `Buffer.byteLength` for the Content-Length, then the socket's UTF-8 encoding) makes it one
 * string, which V8 places in its large-object space: memory mapped afresh for each such string
 * and faulted in page by page. Where a page fault costs ~15 µs (this project's virtual machines),
 * that and the encoding's own buffer were a quarter of a 192 KB answer's time (bench/RESULTS.md,
 * the twenty-seventh session). Here the value's own fields are written one by one and the items
 * of its arrays one by one, gathered into pieces of about 16 K characters (young objects, cheap
 * to flatten), and the pieces encoded into one buffer, which Node takes from its heap and writes
 * as it is. `value` is a plain object of plain data, as the presenters make (`undefined` fields
 * are left out, as `JSON.stringify` does).
 */
export function jsonBody(c: Context, value: Record<string, unknown>): Response {
  const pieces = jsonPieces(value);
  const headers = { "Content-Type": "application/json" };
  if (pieces.length === 1) return c.body(pieces[0] as string, 200, headers);
  let length = 0;
  for (const p of pieces) length += Buffer.byteLength(p);
  const body = Buffer.allocUnsafe(length);
  let at = 0;
  for (const p of pieces) at += body.write(p, at);
  return c.body(body, 200, headers);
}

/** `JSON.stringify(value)` in pieces of about `PIECE_CHARS` (one item may make a piece longer). */
export function jsonPieces(value: Record<string, unknown>): string[] {
  const pieces: string[] = [];
  let piece = "{";
  let first = true;
  const add = (json: string) => {
    piece += json;
    if (piece.length >= PIECE_CHARS) {
      pieces.push(piece);
      piece = "";
    }
  };
  for (const [key, field] of Object.entries(value)) {
    if (Array.isArray(field)) {
      add(`${first ? "" : ","}${JSON.stringify(key)}:[`);
      for (let i = 0; i < field.length; i++)
        // As JSON.stringify does inside an array: what it cannot represent is null.
        add(`${i === 0 ? "" : ","}${JSON.stringify(field[i]) ?? "null"}`);
      add("]");
    } else {
      const json = JSON.stringify(field);
      if (json === undefined) continue;
      add(`${first ? "" : ","}${JSON.stringify(key)}:${json}`);
    }
    first = false;
  }
  pieces.push(`${piece}}`);
  return pieces;
}
