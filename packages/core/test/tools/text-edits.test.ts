import { describe, expect, it } from "vitest";
import { applyTextEdits } from "../../src/tools/text-edits";
import { unifiedDiff } from "../../src/tools/unified-diff";

describe("applyTextEdits", () => {
  it("applies edits in order, each matching exactly one place", () => {
    const outcome = applyTextEdits("a\nb\nc\n", [
      { oldText: "b", newText: "B" },
      { oldText: "B\nc", newText: "B\nC" },
    ]);
    expect(outcome).toEqual({ ok: true, text: "a\nB\nC\n" });
  });

  it("refuses missing and ambiguous matches, naming the edit", () => {
    expect(applyTextEdits("x\nx\n", [{ oldText: "x", newText: "y" }])).toEqual({
      ok: false,
      error:
        "edit 1 of 1: oldText matches 2 places; include more surrounding lines to make it unique",
    });
    const missing = applyTextEdits("x\n", [
      { oldText: "x", newText: "y" },
      { oldText: "z", newText: "" },
    ]);
    expect(missing).toEqual({ ok: false, error: "edit 2 of 2: oldText was not found in the file" });
    expect(applyTextEdits("x", [{ oldText: "", newText: "y" }]).ok).toBe(false);
  });

  it("matches ignoring indentation and re-indents the replacement", () => {
    const source = "function f() {\n    if (x) {\n        go();\n    }\n}\n";
    const outcome = applyTextEdits(source, [
      { oldText: "if (x) {\n    go();\n}", newText: "if (y) {\n    go();\n    stop();\n}" },
    ]);
    expect(outcome).toEqual({
      ok: true,
      text: "function f() {\n    if (y) {\n        go();\n        stop();\n    }\n}\n",
    });
  });

  it("counts loose matches that overlap, and finds one among lines that repeat", () => {
    // "  a / a" occurs (ignoring indentation) at lines 1, 2 and 3 of "a a a a b".
    expect(applyTextEdits(" a\n a\n a\n a\n b\n", [{ oldText: "a\na", newText: "x" }])).toEqual({
      ok: false,
      error:
        "edit 1 of 1: oldText matches 3 places (ignoring indentation); include more surrounding lines to make it unique",
    });
    // A needle whose start repeats inside it ("a a b"), met after a false start ("a a a b").
    expect(
      applyTextEdits("  a\n  a\n  a\n  b\n  c\n", [{ oldText: "a\na\nb", newText: "z" }]),
    ).toEqual({ ok: true, text: "  a\n  z\n  c\n" });
    // Thousands of alike lines and a long oldText: found where it is (once), not elsewhere.
    const lines = Array.from({ length: 20_000 }, () => "    a");
    lines.push("    b");
    const needle = [...Array.from({ length: 10_000 }, () => "a"), "b"].join("\n");
    const big = applyTextEdits(`${lines.join("\n")}\n`, [{ oldText: needle, newText: "c" }]);
    expect(big.ok && big.text).toBe(`${lines.slice(0, 10_000).join("\n")}\n    c\n`);
  });

  it("counts exact matches that overlap, thousands of them in a file of alike lines", () => {
    expect(applyTextEdits("aaaa", [{ oldText: "aa", newText: "b" }])).toEqual({
      ok: false,
      error:
        "edit 1 of 1: oldText matches 3 places; include more surrounding lines to make it unique",
    });
    // Each of 10,001 places matches the whole oldText: counted without comparing it whole
    // at each of them.
    const lines = Array.from({ length: 20_000 }, () => "a");
    const oldText = lines.slice(0, 10_000).join("\n");
    expect(applyTextEdits(`${lines.join("\n")}\n`, [{ oldText, newText: "c" }])).toEqual({
      ok: false,
      error:
        "edit 1 of 1: oldText matches 10001 places; include more surrounding lines to make it unique",
    });
  });

  it("keeps CRLF line endings", () => {
    expect(applyTextEdits("a\r\nb\r\n", [{ oldText: "a\nb", newText: "a\nx" }])).toEqual({
      ok: true,
      text: "a\r\nx\r\n",
    });
  });
});

describe("unifiedDiff", () => {
  it("is empty for equal texts", () => {
    expect(unifiedDiff("a\n", "a\n", "f")).toBe("");
  });

  it("produces hunks with three lines of context", () => {
    const before = `${Array.from({ length: 20 }, (_, i) => `line ${i + 1}`).join("\n")}\n`;
    const after = before.replace("line 2\n", "line two\n").replace("line 18\n", "");
    expect(unifiedDiff(before, after, "f.txt")).toBe(
      [
        "--- a/f.txt",
        "+++ b/f.txt",
        "@@ -1,5 +1,5 @@",
        " line 1",
        "-line 2",
        "+line two",
        " line 3",
        " line 4",
        " line 5",
        "@@ -15,6 +15,5 @@",
        " line 15",
        " line 16",
        " line 17",
        "-line 18",
        " line 19",
        " line 20",
        "",
      ].join("\n"),
    );
  });

  it("marks a missing final newline and handles empty sides", () => {
    expect(unifiedDiff("a", "a\n", "f")).toBe(
      "--- a/f\n+++ b/f\n@@ -1 +1 @@\n-a\n\\ No newline at end of file\n+a\n",
    );
    expect(unifiedDiff("", "new\n", "f")).toBe("--- a/f\n+++ b/f\n@@ -0,0 +1 @@\n+new\n");
  });
});
