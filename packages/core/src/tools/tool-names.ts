/** What Mistral (and OpenAI-style APIs) accept as a function name. */
export const FUNCTION_NAME_PATTERN = /^[a-zA-Z0-9_-]{1,64}$/;
const MAX_NAME_LENGTH = 64;

function sanitize(text: string): string {
  return text.replace(/[^a-zA-Z0-9_-]/g, "_");
}

/** The function name of `server`'s `tool` before any suffix: `${server}__${tool}` made valid. */
export function baseToolName(server: string, tool: string): string {
  return sanitize(`${server}__${tool}`).slice(0, MAX_NAME_LENGTH);
}

/**
 * Hands out function names `${server}__${tool}` made valid (other characters become `_`,
 * at most 64 long) and unique: a name already taken — compared case-insensitively, since
 * some providers fold case — gets a `_2`, `_3`, … suffix.
 */
export class ToolNameAllocator {
  private readonly taken = new Set<string>();

  /** @param reserved names that must never be handed out (e.g. the agent's own `finish`) */
  constructor(reserved: readonly string[] = []) {
    for (const name of reserved) this.taken.add(name.toLowerCase());
  }

  allocate(server: string, tool: string): string {
    const base = baseToolName(server, tool);
    if (!this.taken.has(base.toLowerCase())) return this.take(base);
    for (let n = 2; ; n++) {
      const suffix = `_${n}`;
      const candidate = base.slice(0, MAX_NAME_LENGTH - suffix.length) + suffix;
      if (!this.taken.has(candidate.toLowerCase())) return this.take(candidate);
    }
  }

  private take(name: string): string {
    this.taken.add(name.toLowerCase());
    return name;
  }
}
