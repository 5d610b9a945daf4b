import crypto from "node:crypto";

/**
 * Requests between replicas carry `x-wharf-replica-auth: v1.<kid>.<from>.<to>.<expires>.<nonce>.<mac>`:
 * an HMAC-SHA256, under a key derived from the master key for this purpose only, over the method,
 * the target and who sends it to whom. It expires within seconds, and a nonce is accepted once, so a
 * captured header cannot be replayed, not even to the same replica. Decisions here are pure; the
 * clock and the seen-nonce set are passed in.
 */
export const REPLICA_AUTH_HEADER = "x-wharf-replica-auth";
export const KEY_PURPOSE = "replica-forwarding";
/** A signed request is good for this long (clock differences between replicas count against it). */
export const DEFAULT_TTL_MS = 15_000;
const ID = /^[A-Za-z0-9_-]{1,64}$/;

export interface SignedRequest {
  from: string;
  to: string;
  method: string;
  /** Path and query as sent. */
  target: string;
}

export type Refusal =
  | "missing"
  | "malformed"
  | "wrong-replica"
  | "unknown-key"
  | "bad-signature"
  | "expired"
  | "too-far-ahead"
  | "replayed";
export type Verdict = { ok: true; from: string; nonce: string; expiresMs: number } | { ok: false; reason: Refusal };

function mac(key: Buffer, kid: string, r: SignedRequest, expiresMs: number, nonce: string): Buffer {
  return crypto
    .createHmac("sha256", key)
    .update(["v1", kid, r.from, r.to, String(expiresMs), nonce, r.method.toUpperCase(), r.target].join("\n"))
    .digest();
}

export function signRequest(
  keyFor: (kid?: string) => { kid: string; key: Buffer },
  r: SignedRequest,
  nowMs: number,
  ttlMs = DEFAULT_TTL_MS,
  nonce = crypto.randomBytes(12).toString("base64url"),
): string {
  const { kid, key } = keyFor();
  const expires = nowMs + ttlMs;
  return ["v1", kid, r.from, r.to, String(expires), nonce, mac(key, kid, r, expires, nonce).toString("base64url")].join(
    ".",
  );
}

/** Whether a header is a valid, fresh, first-seen signature for this request to `self`. */
export function verifyRequest(
  keyFor: (kid: string) => Buffer | null,
  header: string | undefined,
  req: { self: string; method: string; target: string },
  nowMs: number,
  seen: (nonce: string, expiresMs: number) => boolean,
  ttlMs = DEFAULT_TTL_MS,
): Verdict {
  if (!header) return { ok: false, reason: "missing" };
  const parts = header.split(".");
  if (parts.length !== 7 || parts[0] !== "v1") return { ok: false, reason: "malformed" };
  const [, kid, from, to, expiresText, nonce, macText] = parts;
  if (!ID.test(from) || !ID.test(to) || !/^\d{1,16}$/.test(expiresText) || !/^[A-Za-z0-9_-]{16}$/.test(nonce))
    return { ok: false, reason: "malformed" };
  if (to !== req.self) return { ok: false, reason: "wrong-replica" };
  const key = keyFor(kid);
  if (!key) return { ok: false, reason: "unknown-key" };
  const expiresMs = Number(expiresText);
  const want = mac(key, kid, { from, to, method: req.method, target: req.target }, expiresMs, nonce);
  const got = Buffer.from(macText, "base64url");
  if (got.length !== want.length || !crypto.timingSafeEqual(got, want)) return { ok: false, reason: "bad-signature" };
  if (expiresMs <= nowMs) return { ok: false, reason: "expired" };
  // A signature that lives longer than any replica would sign for: a clock far off, or a forgery attempt.
  if (expiresMs > nowMs + 2 * ttlMs) return { ok: false, reason: "too-far-ahead" };
  if (seen(nonce, expiresMs)) return { ok: false, reason: "replayed" };
  return { ok: true, from, nonce, expiresMs };
}

/** Nonces seen and still unexpired: a second use of one is a replay. Bounded by the expiry window. */
export class NonceCache {
  private readonly nonces = new Map<string, number>();
  private lastSweep = 0;

  /** Records the nonce; true when it was already there. */
  seen(nonce: string, expiresMs: number, nowMs = Date.now()): boolean {
    if (nowMs - this.lastSweep > 1000) {
      for (const [n, exp] of this.nonces) if (exp <= nowMs) this.nonces.delete(n);
      this.lastSweep = nowMs;
    }
    if (this.nonces.has(nonce)) return true;
    this.nonces.set(nonce, expiresMs);
    return false;
  }

  get size(): number {
    return this.nonces.size;
  }
}
