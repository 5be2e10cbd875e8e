import { describe, expect, it } from "vitest";
import { FUNCTION_NAME_PATTERN, ToolNameAllocator } from "../../src/tools/index";

describe("ToolNameAllocator", () => {
  it("names tools server__tool, replacing characters function names cannot have", () => {
    const names = new ToolNameAllocator();
    expect(names.allocate("workspace", "read_text_file")).toBe("workspace__read_text_file");
    expect(names.allocate("everything", "get-sum")).toBe("everything__get-sum");
    expect(names.allocate("my server", "tools/list.all")).toBe("my_server__tools_list_all");
  });

  it("de-duplicates with a suffix, case-insensitively", () => {
    const names = new ToolNameAllocator();
    expect(names.allocate("a.b", "x")).toBe("a_b__x");
    expect(names.allocate("a_b", "x")).toBe("a_b__x_2");
    expect(names.allocate("A_B", "x")).toBe("A_B__x_3");
  });

  it("keeps names within 64 characters, suffix included", () => {
    const names = new ToolNameAllocator();
    const long = "t".repeat(100);
    const first = names.allocate("server", long);
    const second = names.allocate("server", `${long}-other`);
    expect(first).toHaveLength(64);
    expect(second).toHaveLength(64);
    expect(second.endsWith("_2")).toBe(true);
    for (const name of [first, second]) expect(name).toMatch(FUNCTION_NAME_PATTERN);
  });

  it("never hands out reserved names", () => {
    const names = new ToolNameAllocator(["finish"]);
    expect(names.allocate("", "finish")).toBe("__finish");
    const reserved = new ToolNameAllocator(["ws__finish"]);
    expect(reserved.allocate("ws", "finish")).toBe("ws__finish_2");
  });
});
