import { describe, expect, it } from "vitest";
import { callResultText } from "../../src/tools/call-result-text";
import { capHead as capText } from "../../src/util/cut-marks";

describe("callResultText", () => {
  it("joins text parts and describes the others", () => {
    const text = callResultText({
      content: [
        { type: "text", text: "first" },
        { type: "image", data: "AAAA", mimeType: "image/png" },
        { type: "resource", resource: { uri: "file:///x", text: "inside" } },
        { type: "resource_link", uri: "file:///y", name: "y" },
      ],
    });
    expect(text).toBe(
      'first\n[image image/png, 3 bytes]\n[resource file:///x]\ninside\n[resource link file:///y "y"]',
    );
  });

  it("falls back to structured content, then to a placeholder", () => {
    expect(callResultText({ content: [], structuredContent: { a: 1 } })).toBe('{"a":1}');
    expect(callResultText({ content: [] })).toBe("(no content)");
  });
});

describe("capText", () => {
  it("keeps short texts as they are", () => {
    expect(capText("short", 10)).toBe("short");
  });

  it("keeps the beginning and says how much was cut, never splitting a character", () => {
    expect(capText("abcdefghij", 4)).toBe("abcd\n[… 6 of 10 bytes cut …]");
    // "é" is two bytes: a cap falling inside it keeps the character out.
    expect(capText("aébc", 2)).toBe("a\n[… 4 of 5 bytes cut …]");
  });
});
