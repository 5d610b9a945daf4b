import { toJson } from "../wire.ts";

export interface RunEvent {
  /** Position in the run's stream (the SSE `id:` of thread-run streams). */
  id: number;
  event: string;
  /** Serialised (pretty JSON) once, when a listener first reads it: a run nobody streams pays nothing. */
  readonly json: string;
}

/** An event whose JSON is already serialised (by the Python worker, with Python's own rules). */
class ReadyEvent implements RunEvent {
  constructor(
    readonly id: number,
    readonly event: string,
    readonly json: string,
  ) {}
}

class LazyEvent implements RunEvent {
  private text: string | null = null;
  constructor(
    readonly id: number,
    readonly event: string,
    private data: unknown,
  ) {}

  get json(): string {
    if (this.text === null) {
      this.text = toJson(this.data);
      this.data = null;
    }
    return this.text;
  }
}

/**
 * The output of one executing run: every event in order, kept while the run lives (so a joiner
 * can replay from `Last-Event-ID`), and a wake-up for listeners. No polling: pushes notify.
 */
export class RunChannel {
  readonly events: RunEvent[] = [];
  private waiters: Array<() => void> = [];
  closed = false;
  /**
   * The number of the first event kept here: 0, or where a resumed attempt continues a run whose
   * earlier attempt's events are in Redis (set before the first push).
   */
  base = 0;
  /** Told of every push (the Redis mirror of a replica); it reads the events itself. */
  onPush: (() => void) | null = null;

  push(event: string, data: unknown): void {
    const ev = new LazyEvent(this.base + this.events.length, event, data);
    // With a listener or a mirror attached the chunk is serialised now, before the graph can change it.
    if (this.waiters.length || this.onPush) void ev.json;
    this.events.push(ev);
    this.wake();
  }

  /** An event serialised elsewhere (the Python worker): forwarded as it is. */
  pushJson(event: string, json: string): void {
    this.events.push(new ReadyEvent(this.base + this.events.length, event, json));
    this.wake();
  }

  /** Whether a follower that has seen events up to `after` can be served from here (not from an earlier attempt's). */
  covers(after: number): boolean {
    return after + 1 >= this.base;
  }

  close(): void {
    this.closed = true;
    this.wake();
  }

  private wake(): void {
    this.onPush?.();
    const w = this.waiters;
    this.waiters = [];
    for (const f of w) f();
  }

  /** Events after `after` (an event id; -1 for all), as they come, until the run ends or `signal` aborts. */
  async *follow(after: number, signal?: AbortSignal): AsyncGenerator<RunEvent> {
    // Events before `base` belong to an earlier attempt (in Redis): a follower starts at ours.
    let next = Math.max(after + 1, this.base);
    // One abort listener for the whole follow (not one per awaited event: long runs would pile
    // them up past Node's MaxListeners warning).
    let wakeMe: (() => void) | null = null;
    const onAbort = () => wakeMe?.();
    signal?.addEventListener("abort", onAbort, { once: true });
    try {
      while (true) {
        while (next - this.base < this.events.length) yield this.events[next++ - this.base];
        if (this.closed || signal?.aborted) return;
        await new Promise<void>((resolve) => {
          wakeMe = resolve;
          this.waiters.push(resolve);
        });
        wakeMe = null;
      }
    } finally {
      signal?.removeEventListener("abort", onAbort);
    }
  }
}
