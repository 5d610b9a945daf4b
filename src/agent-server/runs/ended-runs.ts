import type { ActiveRun } from "./run-types.ts";

/**
 * How long an ended run's events stay replayable: resumable runs (`stream_resumable`, what the
 * SDK's `useStream` asks for to rejoin after a reload) for 10 minutes, others briefly (a join that
 * raced the run's end). Bounded in runs and events so memory stays small under load.
 */
export const RESUMABLE_KEEP_MS = 10 * 60_000;
export const ENDED_KEEP_MS = 5_000;
const ENDED_MAX = 200;
const ENDED_MAX_EVENTS = 20_000;

/** Ended runs' channels, kept a while so their events can be replayed (`Last-Event-ID`). */
export class EndedRuns {
  private readonly ended = new Map<string, { active: ActiveRun; until: number }>();

  retain(active: ActiveRun, keepMs: number): void {
    if (active.channel.events.length > ENDED_MAX_EVENTS) return;
    const now = Date.now();
    for (const [id, e] of this.ended) if (e.until < now || this.ended.size >= ENDED_MAX) this.ended.delete(id);
    this.ended.set(active.run.run_id, { active, until: now + keepMs });
  }

  /** An ended run's channel (its full event stream), if still kept. */
  get(runId: string): ActiveRun | undefined {
    const e = this.ended.get(runId);
    return e && e.until >= Date.now() ? e.active : undefined;
  }
}
