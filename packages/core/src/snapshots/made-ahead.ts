import { realpathSync } from "node:fs";
import { join } from "node:path";
import { SpareFiles } from "./spare-files";
import { SpareRepositories } from "./spare-repositories";

/**
 * What a snapshot store makes ahead of need, while its worker waits on commands: files for the
 * next loose objects in each object store it writes to (spare-files.ts, with the store's
 * `objects/xx` directories), and a git dir for the next new session (spare-repositories.ts).
 * After `close` nothing more is made, and what was made is removed.
 */
export class MadeAhead {
  /** Per object store directory (its real path: the sessions share one). */
  private readonly files = new Map<string, SpareFiles>();
  private repositories: SpareRepositories | null = null;
  private closed = false;

  constructor(
    private readonly root: string,
    /** Files kept ready per object store. */
    private readonly count: number,
  ) {}

  /** The spare files of the object store `gitDir` writes to, or undefined (closed, none there). */
  filesFor(gitDir: string): SpareFiles | undefined {
    if (this.closed) return undefined;
    let dir: string;
    try {
      dir = realpathSync(join(gitDir, "objects"));
    } catch {
      return undefined;
    }
    let files = this.files.get(dir);
    if (files === undefined) {
      // Repositories of their own (made before the store was shared) each have theirs: a bound.
      if (this.files.size >= 16) {
        for (const old of this.files.values()) void old.close();
        this.files.clear();
      }
      files = new SpareFiles(dir, this.count);
      this.files.set(dir, files);
    }
    return files;
  }

  /** Makes the files the object stores' writes took since the last call (see SpareFiles.refill). */
  refill(): void {
    for (const files of this.files.values()) files.refill();
  }

  /** Moves the git dir made ahead to the new session's `gitDir`; false when there is none. */
  repositoryAs(gitDir: string): boolean {
    if (this.closed) return false;
    this.repositories ??= new SpareRepositories(this.root);
    return this.repositories.takeAs(gitDir);
  }

  async close(): Promise<void> {
    this.closed = true;
    const closing = [...this.files.values()].map((files) => files.close());
    if (this.repositories !== null) closing.push(this.repositories.close());
    this.files.clear();
    await Promise.all(closing);
  }
}
