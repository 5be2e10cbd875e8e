import type { ContentBlock } from "@modelcontextprotocol/sdk/types.js";

function base64Bytes(data: string): number {
  return Math.floor((data.length * 3) / 4);
}

function blockText(block: ContentBlock): string {
  switch (block.type) {
    case "text":
      return block.text;
    case "image":
    case "audio":
      return `[${block.type} ${block.mimeType}, ${base64Bytes(block.data)} bytes]`;
    case "resource": {
      const { resource } = block;
      return "text" in resource && typeof resource.text === "string"
        ? `[resource ${resource.uri}]\n${resource.text}`
        : `[binary resource ${resource.uri}${resource.mimeType ? ` (${resource.mimeType})` : ""}]`;
    }
    case "resource_link":
      return `[resource link ${block.uri}${block.name ? ` "${block.name}"` : ""}]`;
    default:
      return `[${(block as { type: string }).type} content]`;
  }
}

/**
 * What a tool result says, as text for the model: text parts joined by newlines, other
 * parts (images, audio, resources) as one-line placeholders; the structured content as
 * JSON when there is no content at all.
 */
export function callResultText(result: { content?: unknown; structuredContent?: unknown }): string {
  const blocks = Array.isArray(result.content) ? (result.content as ContentBlock[]) : [];
  if (blocks.length > 0) return blocks.map(blockText).join("\n");
  if (result.structuredContent !== undefined) return JSON.stringify(result.structuredContent);
  return "(no content)";
}
