/** Polls `fn` every 50 ms until it gives something truthy, which it returns; fails naming `what` after `timeoutMs`. */
export async function until<T>(
  what: string,
  fn: () => Promise<T | undefined | null | false>,
  timeoutMs = 15_000,
): Promise<T> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}
