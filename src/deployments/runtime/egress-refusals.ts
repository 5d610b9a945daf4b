import { describeRefusal, refusalAdvice, watchDistinctRefusals } from "../../egress/index.ts";
import type { LogLevel, RevisionLog } from "../store/revision-logs.ts";

/**
 * How long a build step may go on after the proxy refused one of its requests. Package managers
 * retry a refused or failed registry request for minutes (npm: 3.5 minutes of 502s); a step that
 * tolerates the refusal (an optional download) has this long to finish by itself.
 */
export const REFUSED_STEP_GRACE_MS = 5000;

/** Distinct refusals written per process: a client looping over many hosts must not flood the log. */
const MAX_LOGGED = 20;

interface Refused {
  host: string;
  port: number;
  reason?: string | null;
}

/**
 * What would let a build step's request through. An internal address of one of the host's own
 * registries is the operator's one build setting; any other, the proxy's own advice (an internal
 * registry a project names itself stays the egress proxy's operator decision).
 */
export function buildRefusalAdvice(e: Refused, hostRegistries: readonly string[]): string | null {
  const entry = e.port === 80 || e.port === 443 ? e.host : `${e.host}:${e.port}`;
  if (
    /internal address/.test(e.reason ?? "") &&
    (hostRegistries.includes(entry) || hostRegistries.includes(`${e.host}:${e.port}`))
  ) {
    return "the operator's WHARF_BUILD_REGISTRIES_INTERNAL=1 (builds may reach the host's own package registries at internal addresses)";
  }
  return refusalAdvice(e);
}

/**
 * Writes the requests of a process (a build step, an agent server) that the egress proxy refuses
 * or cannot complete into its revision's log: host, reason, and the setting that would allow it,
 * once per (host, reason). `onFirst` hears the first one. Returns the unsubscribe.
 */
export function logEgressRefusals(
  targetId: string,
  log: RevisionLog,
  level: LogLevel,
  onFirst?: (line: string) => void,
  advise: (e: Refused) => string | null = refusalAdvice,
): () => void {
  return watchDistinctRefusals(
    targetId,
    (e, first) => {
      const line = describeRefusal(e, advise(e));
      log.line(line, level);
      if (first) onFirst?.(line);
    },
    MAX_LOGGED,
  );
}

/**
 * A build step's refusals: logged as errors, and the first one stops the step after the grace, so
 * the build fails within seconds saying why.
 */
export class BuildRefusals {
  private first: string | null = null;
  private timer: NodeJS.Timeout | null = null;
  private readonly unwatch: () => void;

  constructor(
    targetId: string,
    log: RevisionLog,
    stopStep: () => void,
    opts: { hostRegistries?: string[]; graceMs?: number } = {},
  ) {
    const hostRegistries = opts.hostRegistries ?? [];
    this.unwatch = logEgressRefusals(
      targetId,
      log,
      "error",
      (line) => {
        this.first = line;
        this.timer = setTimeout(stopStep, opts.graceMs ?? REFUSED_STEP_GRACE_MS);
      },
      (e) => buildRefusalAdvice(e, hostRegistries),
    );
  }

  /** The failure to report instead of the bare exit code, when a refusal came first. */
  failure(what: string): string | null {
    return this.first ? `${what} failed: ${this.first}` : null;
  }

  close(): void {
    if (this.timer) clearTimeout(this.timer);
    this.unwatch();
  }
}
