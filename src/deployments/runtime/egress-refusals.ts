import { describeRefusal, watchEgressRefusals } from "../../egress/index.ts";
import type { LogLevel, RevisionLog } from "../store/revision-logs.ts";

/**
 * How long a build step may go on after the proxy refused one of its requests. Package managers
 * retry a refused or failed registry request for minutes (npm: 3.5 minutes of 502s); a step that
 * tolerates the refusal (an optional download) has this long to finish by itself.
 */
export const REFUSED_STEP_GRACE_MS = 5000;

/** Distinct refusals written per process: a client looping over many hosts must not flood the log. */
const MAX_LOGGED = 20;

/**
 * Writes every distinct request of a process (a build step, an agent server) that the egress proxy
 * refuses or cannot complete into its revision's log: host, reason, and the setting that would
 * allow it. `onFirst` hears the first one. Returns the unsubscribe.
 */
export function logEgressRefusals(targetId: string, log: RevisionLog, level: LogLevel, onFirst?: (line: string) => void): () => void {
  const seen = new Set<string>();
  return watchEgressRefusals(targetId, (e) => {
    const line = describeRefusal(e);
    // A retrying client repeats the same refusal: once in the log is enough.
    if (seen.has(line) || seen.size >= MAX_LOGGED) return;
    seen.add(line);
    log.line(line, level);
    if (seen.size === 1) onFirst?.(line);
  });
}

/**
 * A build step's refusals: logged as errors, and the first one stops the step after the grace, so
 * the build fails within seconds saying why.
 */
export class BuildRefusals {
  private first: string | null = null;
  private timer: NodeJS.Timeout | null = null;
  private readonly unwatch: () => void;

  constructor(targetId: string, log: RevisionLog, stopStep: () => void, graceMs = REFUSED_STEP_GRACE_MS) {
    this.unwatch = logEgressRefusals(targetId, log, "error", (line) => {
      this.first = line;
      this.timer = setTimeout(stopStep, graceMs);
    });
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
