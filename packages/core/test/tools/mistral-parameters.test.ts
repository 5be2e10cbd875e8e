import { describe, expect, it } from "vitest";
import { toMistralParameters } from "../../src/tools/index";

describe("toMistralParameters", () => {
  it("drops meta keywords at every level, keeping properties that merely share their names", () => {
    const parameters = toMistralParameters({
      $schema: "http://json-schema.org/draft-07/schema#",
      $id: "urn:tool",
      type: "object",
      properties: {
        $id: { type: "string", $comment: "a property named $id" },
        list: { type: "array", items: { $schema: "x", type: "string" } },
        choice: { anyOf: [{ $id: "a", type: "string" }, { type: "number" }] },
      },
      required: ["$id"],
    });
    expect(parameters).toEqual({
      type: "object",
      properties: {
        $id: { type: "string" },
        list: { type: "array", items: { type: "string" } },
        choice: { anyOf: [{ type: "string" }, { type: "number" }] },
      },
      required: ["$id"],
    });
  });

  it("always yields an object schema with properties", () => {
    expect(toMistralParameters({ $schema: "x" })).toEqual({ type: "object", properties: {} });
    expect(toMistralParameters(undefined)).toEqual({ type: "object", properties: {} });
    expect(toMistralParameters({ type: "object" })).toEqual({ type: "object", properties: {} });
  });

  it("rewrites draft-4 boolean exclusive bounds", () => {
    const parameters = toMistralParameters({
      type: "object",
      properties: {
        n: {
          type: "integer",
          minimum: 0,
          exclusiveMinimum: true,
          maximum: 9,
          exclusiveMaximum: false,
        },
      },
    });
    expect(parameters.properties).toEqual({
      n: { type: "integer", exclusiveMinimum: 0, maximum: 9 },
    });
  });
});
