const BASE_NAMES = ["PATH", "HOME", "LANG", "TERM", "USER", "SHELL", "TMPDIR"];

/** Whether every command gets the variable (the minimal base, `LC_*`, `LOOPRUN_*`): no secret. */
export function isBaseVariable(name: string): boolean {
  return BASE_NAMES.includes(name) || name.startsWith("LC_") || name.startsWith("LOOPRUN_");
}

/**
 * The environment a command gets: a minimal base, `LC_*`, `LOOPRUN_*`, the names in
 * `allowlist`, then `extra` — never the rest of looprun's own environment (its secrets).
 */
export function buildCommandEnv(
  source: Record<string, string | undefined>,
  allowlist: readonly string[],
  extra: Record<string, string> = {},
): Record<string, string> {
  const env: Record<string, string> = {};
  const allowed = new Set([...BASE_NAMES, ...allowlist]);
  for (const [name, value] of Object.entries(source)) {
    if (value === undefined) continue;
    if (allowed.has(name) || isBaseVariable(name)) {
      env[name] = value;
    }
  }
  env.PATH ??= "/usr/local/bin:/usr/bin:/bin";
  return { ...env, ...extra };
}
