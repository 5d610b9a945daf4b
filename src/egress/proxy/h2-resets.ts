/**
 * Rapid reset (CVE-2023-44487): a client that opens streams and resets them at once makes the
 * proxy start work for each. nghttp2's own limit reacts late (a burst of 1000, then 33/s) and on
 * Node 20 the session it gives up on is never closed. So the proxy counts the streams the peer
 * aborts per session and closes the session past this many within one window.
 */
export const RESET_LIMIT = 100;
export const RESET_WINDOW_MS = 1000;

/** A sliding count of aborted streams: `hit(now)` is true when the session must be closed. */
export class ResetCounter {
  private windowStart = 0;
  private count = 0;

  constructor(
    private readonly limit = RESET_LIMIT,
    private readonly windowMs = RESET_WINDOW_MS,
  ) {}

  hit(now: number): boolean {
    if (now - this.windowStart >= this.windowMs) {
      this.windowStart = now;
      this.count = 0;
    }
    return ++this.count > this.limit;
  }
}
