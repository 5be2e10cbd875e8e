import { linkSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { hostname } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { processExists } from "../process/process-exists";

/**
 * Which processes write into a snapshot store (`<root>`, the sessions' git dirs and their
 * shared objects): each one that writes leaves a file named after itself in `<root>/.writers/`
 * (`<host>_<pid>`) from its first write until it exits. A writer remembers what the store holds
 * (the objects it wrote, the workspaces' files as it last read them) and writes trees naming
 * those objects without writing them again: `looprun gc` (snapshot-gc.ts), which removes
 * objects, must not run beside one.
 */
const WRITERS_DIR = ".writers";

/** The roots where this process has left its file (each removed as the process exits). */
const filed = new Set<string>();
/** The roots it writes into: its file is there and no collection ran after it was made. */
const marked = new Set<string>();

/** How often a writer that found a collection running looks again. */
const COLLECTION_POLL_MS = 500;

/**
 * Says that this process writes into the store at `root`: its file first (once), then, while a
 * `looprun gc` holds the store (`.gc.lock`, see snapshot-gc.ts), it waits for it to end — a
 * collection that began before the file was there did not see it. The collector takes its lock
 * first and reads the files after: one of the two sees the other. Once it has returned, `isWriter`
 * says so without a promise.
 */
export async function markWriter(root: string, signal?: AbortSignal): Promise<void> {
  if (!filed.has(root)) {
    const dir = join(root, WRITERS_DIR);
    mkdirSync(dir, { recursive: true });
    const file = join(dir, `${hostname()}_${process.pid}`);
    writeFileSync(file, `${JSON.stringify({ pid: process.pid, argv: process.argv.slice(1) })}\n`);
    if (filed.size === 0) process.once("exit", forgetMarks);
    filed.add(root);
  }
  while (collectorOf(root) !== null) {
    await sleep(COLLECTION_POLL_MS, undefined, signal ? { signal } : {});
  }
  marked.add(root);
}

/** Whether this process has marked itself a writer of `root` (see markWriter). */
export function isWriter(root: string): boolean {
  return marked.has(root);
}

/** The file a collector holds while it collects the store: `<host> <pid>` (see holdCollection). */
export const GC_LOCK = ".gc.lock";

/** A `looprun gc` collecting a store. */
export interface Collector {
  host: string;
  pid: number;
}

/**
 * The `looprun gc` that holds the store at `root`, or null: one of this host whose process is
 * gone (killed) holds nothing; one of another host does (this one cannot tell).
 */
export function collectorOf(root: string): Collector | null {
  let text: string;
  try {
    text = readFileSync(join(root, GC_LOCK), "utf8");
  } catch {
    return null;
  }
  const [host = "", pidText = ""] = text.trim().split(" ");
  const pid = Number(pidText);
  if (!Number.isInteger(pid) || pid <= 0) return null;
  if (host !== hostname()) return { host, pid };
  return pid !== process.pid && processExists(pid) ? { host, pid } : null;
}

/**
 * Takes the store at `root` for a collection (`<root>/.gc.lock`; one left by a collector of this
 * host that is gone is taken over); returns what gives it back, or null when another collector
 * holds it.
 */
export function holdCollection(root: string): (() => void) | null {
  const file = join(root, GC_LOCK);
  const mine = `${hostname()} ${process.pid}\n`;
  // Made whole, then linked into place: a lock is never seen empty (taken for a stale one).
  const draft = `${file}.${process.pid}`;
  writeFileSync(draft, mine);
  try {
    if (!linked(draft, file)) {
      if (collectorOf(root) !== null) return null;
      rmSync(file, { force: true });
      if (!linked(draft, file)) return null;
    }
  } finally {
    rmSync(draft, { force: true });
  }
  // Two collectors taking over the same stale lock at once: the second one's removal of it may
  // have taken the first one's new lock away. Whoever's lock is there holds it.
  if (readFileSync(file, "utf8") !== mine) return null;
  return () => {
    // Only its own: one taken over meanwhile (this one thought gone) is the other's.
    let text = "";
    try {
      text = readFileSync(file, "utf8");
    } catch {}
    if (text === mine) rmSync(file, { force: true });
  };
}

/** Links `from` as `to`; false when `to` is there already. */
function linked(from: string, to: string): boolean {
  try {
    linkSync(from, to);
    return true;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "EEXIST") return false;
    throw error;
  }
}

function forgetMarks(): void {
  for (const root of filed) {
    rmSync(join(root, WRITERS_DIR, `${hostname()}_${process.pid}`), { force: true });
  }
  filed.clear();
  marked.clear();
}

/** A process that said it writes into the store. */
export interface StoreWriter {
  host: string;
  pid: number;
  /** Its command line, as it wrote it (for people). */
  command: string;
  /** The file that says so: a writer on another host that is gone leaves it behind. */
  file: string;
}

/**
 * The writers of the store at `root` that may still run: those of this host whose process
 * exists (not this process), and every one of another host (this one cannot tell). The files of
 * this host's writers that are gone are removed.
 */
export function liveWriters(root: string): StoreWriter[] {
  const dir = join(root, WRITERS_DIR);
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return [];
    throw error;
  }
  const here = hostname();
  const writers: StoreWriter[] = [];
  for (const name of names) {
    const cut = name.lastIndexOf("_");
    const host = name.slice(0, cut);
    const pid = Number(name.slice(cut + 1));
    if (cut <= 0 || !Number.isInteger(pid) || pid <= 0) continue;
    const file = join(dir, name);
    if (host === here && (pid === process.pid || !processExists(pid))) {
      if (pid !== process.pid) rmSync(file, { force: true });
      continue;
    }
    writers.push({ host, pid, command: commandOf(file), file });
  }
  return writers;
}

function commandOf(file: string): string {
  try {
    const { argv } = JSON.parse(readFileSync(file, "utf8")) as { argv?: unknown };
    return Array.isArray(argv) ? argv.join(" ") : "";
  } catch {
    return "";
  }
}
