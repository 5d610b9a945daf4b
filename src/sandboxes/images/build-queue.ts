/**
 * At most `limit` jobs at once, the rest wait in order: snapshot builds pull, decompress and
 * unpack images, and many at once would exhaust the host's disk, memory and CPU together.
 */
export class BuildQueue {
  private running = 0;
  private readonly waiting: Array<() => void> = [];

  constructor(private readonly limit: number) {}

  /** Jobs that would wait if started now. */
  get ahead(): number {
    return this.running >= this.limit ? this.waiting.length + 1 : 0;
  }

  async run<T>(job: () => Promise<T>): Promise<T> {
    if (this.running >= this.limit) await new Promise<void>((resolve) => this.waiting.push(resolve));
    else this.running++;
    try {
      return await job();
    } finally {
      const next = this.waiting.shift();
      // The slot passes straight to the next job, so `running` stays counted for it.
      if (next) next();
      else this.running--;
    }
  }
}
