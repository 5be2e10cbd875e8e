// The long-lived server commands (api, worker, dev) run as a JavaScript bundle of looprun's
// TypeScript sources, built by esbuild at every start (tens of milliseconds, so it can never be
// stale), instead of through tsx: tsx's loader thread and its per-file transforms held ~40 MB of
// RSS for the life of each process (and a bigger process pays more for every fork of a command).
// Dependencies stay external (node_modules, as installed).
import { createHash } from "node:crypto";
import {
  mkdirSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { build, stop } from "esbuild";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "../../..");
const CACHE = join(root, "node_modules/.cache/looprun");
const PRUNE_AFTER_MS = 3_600_000;

/**
 * Keeps every source's own `import.meta.url`: paths next to a source (migrations, assets) still
 * resolve. `import.meta.filename` is left as it is: the bundle file's own path.
 */
const ownImportMetaUrl = {
  name: "own-import-meta-url",
  setup(b) {
    b.onResolve({ filter: /^[^./]/ }, (args) =>
      args.path.startsWith("@looprun/") ? undefined : { path: args.path, external: true },
    );
    b.onLoad({ filter: /\.tsx?$/ }, (args) => {
      const source = readFileSync(args.path, "utf8");
      return {
        contents: source.replaceAll(
          "import.meta.url",
          JSON.stringify(pathToFileURL(args.path).href),
        ),
        loader: args.path.endsWith("x") ? "tsx" : "ts",
        resolveDir: dirname(args.path),
      };
    });
  },
};

/**
 * Bundles `entry` into node_modules/.cache (where the dependencies resolve) and returns the
 * bundle's URL, or null when it cannot (e.g. a read-only install): then tsx runs the sources.
 */
export async function bundle(entry) {
  try {
    return pathToFileURL(await write(entry)).href;
  } catch (error) {
    process.stderr.write(`looprun: running through tsx, the bundle failed: ${error.message}\n`);
    return null;
  }
}

async function write(entry) {
  const result = await build({
    entryPoints: {
      main: fileURLToPath(entry),
      // Started by workers for each iteration of a mistral agent (workspace-server-launch.ts
      // finds it beside its own chunk): from the bundle it starts in ~130 ms with ~66 MB,
      // through tsx in ~300 ms with ~102 MB (bench/RESULTS.md, scenario 7).
      "workspace-server": join(root, "packages/core/src/tools/workspace-server-main.ts"),
    },
    bundle: true,
    // Code split at dynamic imports: a command loads only what it runs (an API process does not
    // load the worker's engine, agents and MCP client, nor a worker the dashboard).
    splitting: true,
    outdir: "/",
    write: false,
    platform: "node",
    format: "esm",
    target: "node20",
    tsconfig: join(root, "tsconfig.json"),
    plugins: [ownImportMetaUrl],
    logLevel: "error",
  }).finally(() => {
    // esbuild's service process would stay, idle, for the life of the API or worker (16-44 MB
    // and a few threads): it is needed once.
    stop();
  });
  const hash = createHash("sha1");
  for (const f of result.outputFiles) hash.update(f.path).update(f.contents);
  const dir = join(CACHE, `looprun-${hash.digest("hex").slice(0, 16)}`);
  try {
    statSync(dir);
  } catch {
    // Several processes may start at once: each writes its own directory and renames it into place.
    mkdirSync(CACHE, { recursive: true });
    const tmp = `${dir}.${process.pid}.tmp`;
    mkdirSync(tmp, { recursive: true });
    for (const f of result.outputFiles) writeFileSync(join(tmp, f.path), f.contents);
    try {
      renameSync(tmp, dir);
    } catch (error) {
      rmSync(tmp, { recursive: true, force: true });
      if (error.code !== "ENOTEMPTY" && error.code !== "EEXIST") throw error;
    }
    prune(dir);
  }
  return join(dir, "main.js");
}

function prune(keep) {
  for (const name of readdirSync(CACHE)) {
    const path = join(CACHE, name);
    try {
      if (path !== keep && Date.now() - statSync(path).mtimeMs > PRUNE_AFTER_MS)
        rmSync(path, { recursive: true, force: true });
    } catch {
      // another process pruned it first
    }
  }
}
