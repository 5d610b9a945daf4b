import crypto from "node:crypto";
import type { AuthContext } from "../auth/custom-auth.ts";
import type { AuthCacheConfig } from "../project/project.ts";

/**
 * `auth.cache`: authenticate results by the values of the configured headers, for `ttlSeconds`, at
 * most `maxSize` (least recently used out first). Keys are hashes: no credential is kept in clear.
 * A request carrying none of the headers is never cached.
 */
export class AuthCache {
  private readonly entries = new Map<string, { ctx: AuthContext; until: number }>();

  constructor(
    private readonly config: AuthCacheConfig,
    private readonly now: () => number = Date.now,
  ) {}

  key(headers: Headers): string | null {
    const values = this.config.cacheKeys.map((k) => headers.get(k));
    if (values.every((v) => v === null)) return null;
    return crypto.createHash("sha256").update(JSON.stringify(values)).digest("hex");
  }

  get(key: string): AuthContext | null {
    const e = this.entries.get(key);
    if (!e) return null;
    this.entries.delete(key);
    if (e.until <= this.now()) return null;
    this.entries.set(key, e);
    return e.ctx;
  }

  set(key: string, ctx: AuthContext): void {
    this.entries.delete(key);
    this.entries.set(key, { ctx, until: this.now() + this.config.ttlSeconds * 1000 });
    while (this.entries.size > this.config.maxSize) this.entries.delete(this.entries.keys().next().value!);
  }
}
