import { describeRefusal, watchEgressRefusals } from "../../egress/index.ts";
import type { RevisionLog } from "../store/revision-logs.ts";

/**
 * How long a build step may go on after the proxy refused one of its requests. Package managers
 * retry a refused or failed registry request for minutes (npm: 3.5 minutes of 502s); a step that
 * tolerates the refusal (an optional download) has this long to finish by itself.
 */
export const REFUSED_STEP_GRACE_MS = 5000;

/**
 * Watches one build step's egress: every refused or failed request goes into the build log with
 * the proxy's reason and the setting that would allow it, and the first one stops the step after
 * the grace, so the build fails within seconds saying why.
 */
export class BuildRefusals {
  private first: string | null = null;
  private timer: NodeJS.Timeout | null = null;
  private readonly seen = new Set<string>();
  private readonly unwatch: () => void;

  constructor(targetId: string, log: RevisionLog, stopStep: () => void, graceMs = REFUSED_STEP_GRACE_MS) {
    this.unwatch = watchEgressRefusals(targetId, (e) => {
      const line = describeRefusal(e);
      // A retrying client repeats the same refusal: once in the log is enough.
      if (this.seen.has(line) || this.seen.size > 20) return;
      this.seen.add(line);
      log.line(line, "error");
      if (this.first) return;
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
