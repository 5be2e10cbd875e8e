import { lstat, readlink, realpath } from "node:fs/promises";
import { isAbsolute, join, resolve, sep } from "node:path";
import { PathConfinementError } from "./errors";

/** Linux gives up after 40 symlinks in one resolution; so do we. */
const MAX_SYMLINK_HOPS = 40;

/** Whether `child` is `parent` or lies below it, compared by whole path components. */
export function isWithin(parent: string, child: string): boolean {
  if (child === parent) return true;
  const prefix = parent.endsWith(sep) ? parent : parent + sep;
  return child.startsWith(prefix);
}

function errorCode(error: unknown): string | undefined {
  return (error as NodeJS.ErrnoException | undefined)?.code;
}

/**
 * The physical location of an absolute path: each existing component is looked at with
 * `lstat` and symlinks (dangling ones too) are followed, as the kernel would; the part
 * that does not exist yet is appended as it is. Unlike `realpath`, this also catches a
 * dangling symlink whose target lies outside (writing through it would create the file there).
 */
async function physicalPath(absolute: string, original: string): Promise<string> {
  const pending = absolute.split(sep).filter((c) => c.length > 0);
  let resolved: string = sep;
  let hops = 0;
  while (pending.length > 0) {
    const component = pending.shift()!;
    if (component === ".") continue;
    if (component === "..") {
      resolved = resolve(resolved, "..");
      continue;
    }
    const next = join(resolved, component);
    let isLink: boolean;
    try {
      isLink = (await lstat(next)).isSymbolicLink();
    } catch (error) {
      const code = errorCode(error);
      // Nothing below a missing (or non-directory) component exists: the rest is lexical.
      if (code === "ENOENT" || code === "ENOTDIR") return resolve(next, ...pending);
      throw error;
    }
    if (!isLink) {
      resolved = next;
      continue;
    }
    hops += 1;
    if (hops > MAX_SYMLINK_HOPS) {
      throw new PathConfinementError(
        "symlink_loop",
        original,
        `too many symlinks in path: ${original}`,
      );
    }
    const target = await readlink(next);
    if (isAbsolute(target)) resolved = sep;
    pending.unshift(...target.split(sep).filter((c) => c.length > 0));
  }
  return resolved;
}

/**
 * Resolves a tool's path argument inside the workspace `root` and returns its absolute
 * physical path (symlinks resolved), or throws a {@link PathConfinementError}.
 *
 * Relative paths are taken from the root; absolute ones are accepted only when they lie in
 * it. Symlinks are followed, so a link inside the workspace that points out is refused, and
 * containment is checked by whole components (`/ws-evil` is not inside `/ws`).
 */
export async function confinePath(root: string, input: string): Promise<string> {
  if (input.includes("\0")) {
    throw new PathConfinementError("nul_byte", input, "path contains a NUL byte");
  }
  let realRoot: string;
  try {
    realRoot = await realpath(root);
  } catch (error) {
    throw new PathConfinementError(
      "invalid_root",
      input,
      `workspace root ${root} is not accessible (${errorCode(error) ?? String(error)})`,
    );
  }
  const lexical = resolve(realRoot, input);
  const physical = await physicalPath(lexical, input);
  if (!isWithin(realRoot, physical)) {
    throw new PathConfinementError(
      "outside_workspace",
      input,
      `access denied: ${input} resolves to ${physical}, outside the workspace ${realRoot}`,
    );
  }
  return physical;
}
