/** One sample of the Prometheus text format. */
export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

const NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const SAMPLE = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s+(\S+)(\s+-?\d+)?$/;
const LABEL = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"\s*(,|$)/y;
const TYPES = new Set(["counter", "gauge", "histogram", "summary", "untyped"]);

function parseValue(text: string, line: string): number {
  if (text === "+Inf") return Number.POSITIVE_INFINITY;
  if (text === "-Inf") return Number.NEGATIVE_INFINITY;
  if (text === "NaN") return Number.NaN;
  const n = Number(text);
  if (text === "" || Number.isNaN(n)) throw new Error(`bad value in ${JSON.stringify(line)}`);
  return n;
}

/**
 * A strict parser of the Prometheus text exposition format (0.0.4): every line must be a HELP,
 * a TYPE (declared once, before its samples) or a well-formed sample; anything else throws.
 */
export function parsePrometheusText(text: string): {
  samples: Sample[];
  types: Map<string, string>;
} {
  const types = new Map<string, string>();
  const samples: Sample[] = [];
  for (const line of text.split("\n")) {
    if (line.trim() === "") continue;
    if (line.startsWith("#")) {
      const [, kind, name, rest] = /^# (HELP|TYPE) (\S+) ?(.*)$/.exec(line) ?? [];
      if (!kind || !name || !NAME.test(name))
        throw new Error(`bad comment line ${JSON.stringify(line)}`);
      if (kind === "TYPE") {
        if (!TYPES.has(rest ?? "")) throw new Error(`bad type in ${JSON.stringify(line)}`);
        if (types.has(name)) throw new Error(`TYPE of ${name} declared twice`);
        types.set(name, rest ?? "");
      }
      continue;
    }
    const m = SAMPLE.exec(line);
    if (!m?.[1] || m[4] === undefined) throw new Error(`bad sample line ${JSON.stringify(line)}`);
    const labels: Record<string, string> = {};
    const body = m[3] ?? "";
    LABEL.lastIndex = 0;
    while (LABEL.lastIndex < body.length) {
      const start = LABEL.lastIndex;
      const l = LABEL.exec(body);
      if (!l?.[1] || l.index !== start) throw new Error(`bad labels in ${JSON.stringify(line)}`);
      labels[l[1]] = (l[2] ?? "").replace(/\\(.)/g, (_x, c: string) => (c === "n" ? "\n" : c));
    }
    const family = m[1].replace(/_(bucket|sum|count)$/, "");
    if (!types.has(m[1]) && !types.has(family)) throw new Error(`sample ${m[1]} has no TYPE`);
    samples.push({ name: m[1], labels, value: parseValue(m[4], line) });
  }
  return { samples, types };
}

/** The value of the sample named `name` whose labels include `labels`. */
export function sampleValue(
  samples: Sample[],
  name: string,
  labels: Record<string, string> = {},
): number | undefined {
  return samples.find(
    (s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v),
  )?.value;
}
