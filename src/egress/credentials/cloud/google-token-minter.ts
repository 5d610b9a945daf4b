import { noAudit, type CloudAuditSink } from "./cloud-audit.ts";
import type { GoogleServiceAccount } from "./google-service-account.ts";

/**
 * Mints OAuth access tokens for a `cloud_b` rule with google-auth-library's JWT client (JWT-bearer
 * grant signed with the service account's key), caches each until shortly before it expires and
 * makes concurrent callers share one mint.
 *
 * google-auth-library 10 posts to https://oauth2.googleapis.com/token whatever the JSON says, so
 * the token endpoint of the JSON (`token_uri`) is applied by a request interceptor on the client's
 * transport, and the assertion's `aud` is set to it too (Google requires aud == token endpoint).
 * The transport uses the `fetch` the proxy supplies, so the token endpoint is dialled through the
 * proxy's own address classification, never through a sandbox.
 */
export interface GoogleTokenMinterOptions {
  serviceAccount: GoogleServiceAccount;
  scopes: string[];
  fetch?: typeof fetch;
  audit?: CloudAuditSink;
  now?: () => number;
  /** Refresh this long before expiry (capped at a quarter of the lifetime); default 5 minutes. */
  refreshMarginMs?: number;
}

const LIBRARY_TOKEN_URL = "https://oauth2.googleapis.com/token";

export class GoogleTokenUnavailable extends Error {
  readonly status = 502;
  readonly publicMessage = "cloud credential unavailable";
  constructor(detail: string) {
    super(`google token mint failed: ${detail}`);
    this.name = "GoogleTokenUnavailable";
  }
}

interface Cached {
  token: string;
  refreshAt: number;
  expiresAt: number;
}

export class GoogleTokenMinter {
  private cached: Cached | null = null;
  private inflight: Promise<Cached> | null = null;
  private readonly audit: CloudAuditSink;
  private readonly now: () => number;
  private readonly margin: number;

  constructor(private readonly options: GoogleTokenMinterOptions) {
    if (options.scopes.length === 0) throw new Error("a cloud_b rule needs at least one scope");
    this.audit = options.audit ?? noAudit;
    this.now = options.now ?? Date.now;
    this.margin = options.refreshMarginMs ?? 5 * 60_000;
  }

  /** A valid access token; `cache` says whether this call minted it. */
  async token(): Promise<{ token: string; cache: "hit" | "miss" }> {
    const c = this.cached;
    if (c && this.now() < c.refreshAt) return { token: c.token, cache: "hit" };
    if (!this.inflight) {
      this.inflight = this.mint().finally(() => {
        this.inflight = null;
      });
    }
    const minted = await this.inflight;
    return { token: minted.token, cache: "miss" };
  }

  private async mint(): Promise<Cached> {
    const { serviceAccount, scopes } = this.options;
    // Loaded at the first mint (before the latency it audits starts), not with the module:
    // google-auth-library and its HTTP stack are only needed where a `cloud_b` rule is served.
    const { JWT } = await import("google-auth-library");
    const started = performance.now();
    const tokenUri = serviceAccount.tokenUri;
    const client = new JWT({
      email: serviceAccount.clientEmail,
      key: serviceAccount.privateKey,
      keyId: serviceAccount.privateKeyId,
      scopes,
      additionalClaims: { aud: tokenUri },
      transporterOptions: this.options.fetch ? { fetchImplementation: this.options.fetch as never } : {},
    });
    client.transporter.interceptors.request.add({
      resolved: async (config) => {
        if (String(config.url) === LIBRARY_TOKEN_URL) config.url = new URL(tokenUri);
        // One attempt: a failing token endpoint fails the request now rather than after backoff.
        config.retry = false;
        return config;
      },
    });
    try {
      const credentials = await client.authorize();
      const token = credentials.access_token;
      if (!token) throw new Error("token endpoint answered without access_token");
      const mintedAt = this.now();
      const expiresAt = typeof credentials.expiry_date === "number" ? credentials.expiry_date : mintedAt + 3600_000;
      const lifetime = Math.max(0, expiresAt - mintedAt);
      const cached = { token, expiresAt, refreshAt: expiresAt - Math.min(this.margin, lifetime / 4) };
      this.cached = cached;
      this.audit({
        kind: "google_token_minted",
        clientEmail: serviceAccount.clientEmail,
        scopes,
        latencyMs: performance.now() - started,
        expiresInSeconds: Math.round(lifetime / 1000),
      });
      return cached;
    } catch (err) {
      const message = describe(err);
      this.audit({
        kind: "google_token_failed",
        clientEmail: serviceAccount.clientEmail,
        scopes,
        latencyMs: performance.now() - started,
        message,
      });
      throw new GoogleTokenUnavailable(message);
    }
  }
}

/** An error description without response bodies or tokens: status and error code only. */
function describe(err: unknown): string {
  const e = err as { response?: { status?: number; data?: { error?: unknown } }; code?: unknown; message?: unknown };
  if (e?.response?.status) {
    const code = typeof e.response.data?.error === "string" ? ` ${e.response.data.error}` : "";
    return `token endpoint answered ${e.response.status}${code}`;
  }
  if (typeof e?.code === "string") return `transport error ${e.code}`;
  return typeof e?.message === "string" ? e.message.slice(0, 200) : "unknown error";
}
