import crypto from "node:crypto";
import type { Kysely } from "kysely";
import type { SecretBox } from "../crypto/secret-box.ts";
import { HttpError } from "../http/errors.ts";
import type { Logger } from "../log/logger.ts";
import { nowIso } from "../store/database.ts";
import type { Database } from "../store/schema.ts";
import { clientConfiguration, ProviderCallError, refreshGrant, type TokenSet } from "./oauth-client.ts";
import { getProvider, openProviderSecret } from "./provider-store.ts";
import type { ConnectionSettings } from "./settings.ts";
import {
  expiresAtFrom,
  openAccessToken,
  openRefreshToken,
  reloadToken,
  sealedTokenColumns,
  type TokenRow,
} from "./token-vault.ts";

export type FreshToken = { kind: "ok"; row: TokenRow; accessToken: string } | { kind: "expired"; row: TokenRow };

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const isoIn = (seconds: number) => new Date(Date.now() + seconds * 1000).toISOString();

/** Backoff between attempts on transient provider failures (the lease bounds the total). */
const RETRY_DELAYS_MS = [250, 1000, 3000];
const POLL_MS = 40;
const FAILED_PREFIX = "failed:";
const FAILURE_COOLDOWN_SECONDS = 5;

/**
 * Hands out access tokens that are fresh, refreshing them when they are near expiry. One refresh
 * per token at a time across every process sharing the database: the refresher first takes a
 * lease on the row with a conditional UPDATE (only for the generation it read, only if no live
 * lease), and every other reader polls the row until the generation moves. A crashed refresher's
 * lease simply runs out.
 */
export class TokenRefresher {
  /** Identifies this process's leases in the row (useful when looking at a stuck lease). */
  readonly leaseOwner = `${process.pid}:${crypto.randomUUID()}`;
  refreshCount = 0;

  constructor(
    private readonly db: Kysely<Database>,
    private readonly box: SecretBox,
    private readonly log: Logger,
    private readonly settings: ConnectionSettings,
  ) {}

  private needsRefresh(row: TokenRow, windowSeconds: number): boolean {
    return row.expires_at !== null && row.expires_at <= isoIn(windowSeconds);
  }

  private isExpired(row: TokenRow): boolean {
    return row.expires_at !== null && row.expires_at <= nowIso();
  }

  /**
   * A usable access token for the row, refreshed first if it expires within the skew (or the
   * given window, for the background sweep). `expired` means re-authentication is needed. A
   * provider's failure is a 502/503 for the caller, never a 500.
   */
  async fresh(initial: TokenRow, windowSeconds = this.settings.refreshSkewSeconds): Promise<FreshToken> {
    let row = initial;
    const deadline = Date.now() + (this.settings.refreshLeaseSeconds + 5) * 1000;
    for (;;) {
      if (row.status !== "active") return { kind: "expired", row };
      if (!this.needsRefresh(row, windowSeconds))
        return { kind: "ok", row, accessToken: openAccessToken(this.box, row) };
      if (!row.refresh_cipher) {
        if (!this.isExpired(row)) return { kind: "ok", row, accessToken: openAccessToken(this.box, row) };
        return {
          kind: "expired",
          row: await this.markExpired(row, "the access token expired and the provider gave no refresh token"),
        };
      }
      const now = nowIso();
      if (row.refresh_lease_until !== null && row.refresh_lease_until > now) {
        // A refresh is under way elsewhere (or failed moments ago). A token that still works is
        // handed out as is; only readers of an already expired token wait for the outcome.
        if (!this.isExpired(row)) return { kind: "ok", row, accessToken: openAccessToken(this.box, row) };
        if (row.refresh_lease_owner?.startsWith(FAILED_PREFIX)) {
          throw new HttpError(
            503,
            `Provider ${row.provider_id} could not refresh the token (${row.last_error ?? "unknown error"}); retry later`,
            { "Retry-After": "5" },
          );
        }
      }
      const lease = await this.db
        .updateTable("oauth_tokens")
        .set({ refresh_lease_until: isoIn(this.settings.refreshLeaseSeconds), refresh_lease_owner: this.leaseOwner })
        .where("id", "=", row.id)
        .where("generation", "=", row.generation)
        .where((eb) => eb.or([eb("refresh_lease_until", "is", null), eb("refresh_lease_until", "<", now)]))
        .executeTakeFirst();
      if (Number(lease.numUpdatedRows) === 1) return this.refreshUnderLease(row);
      // Someone else is refreshing (or just did): wait for the row to move on.
      if (Date.now() > deadline)
        throw new HttpError(503, "Token refresh is taking too long; retry shortly", { "Retry-After": "2" });
      await sleep(POLL_MS + Math.floor(Math.random() * POLL_MS));
      const next = await reloadToken(this.db, row.id);
      if (!next) throw new HttpError(404, "OAuth token not found");
      row = next;
    }
  }

  private async markExpired(row: TokenRow, reason: string): Promise<TokenRow> {
    await this.db
      .updateTable("oauth_tokens")
      .set((eb) => ({
        status: "token_expired",
        last_error: reason,
        refresh_lease_until: null,
        refresh_lease_owner: null,
        generation: eb("generation", "+", 1),
        updated_at: nowIso(),
      }))
      .where("id", "=", row.id)
      .where("generation", "=", row.generation)
      .execute();
    return (await reloadToken(this.db, row.id)) ?? { ...row, status: "token_expired" };
  }

  private async refreshUnderLease(row: TokenRow): Promise<FreshToken> {
    const leaseEnds = Date.now() + this.settings.refreshLeaseSeconds * 1000;
    const refreshToken = openRefreshToken(this.box, row)!;
    const provider = openProviderSecret(this.box, await getProvider(this.db, row.workspace_id, row.provider_id));
    const config = clientConfiguration(provider, this.settings.providerTimeoutSeconds);
    let failure: ProviderCallError | null = null;
    for (let attempt = 0; ; attempt++) {
      try {
        this.refreshCount++;
        const tokens = await refreshGrant(provider, config, refreshToken);
        return await this.storeRefreshed(row, tokens);
      } catch (err) {
        failure =
          err instanceof ProviderCallError
            ? err
            : new ProviderCallError("rejected", (err as Error).message, null, { cause: err });
        const delay = RETRY_DELAYS_MS[attempt];
        const room = leaseEnds - Date.now() - this.settings.providerTimeoutSeconds * 1000;
        if (failure.kind !== "transient" || delay === undefined || delay > room) break;
        this.log.warn(
          { tokenId: row.id, provider: row.provider_id, attempt: attempt + 1, err: failure },
          "token refresh failed, retrying",
        );
        await sleep(delay);
      }
    }
    if (failure.kind === "invalid_grant") {
      this.log.warn(
        { tokenId: row.id, provider: row.provider_id },
        "refresh token refused by the provider; the connection needs re-authentication",
      );
      return { kind: "expired", row: await this.markExpired(row, failure.message) };
    }
    // Keep the lease for a short cool-down marked as failed: readers of an expired token get a 503
    // at once instead of each retrying the provider; afterwards the next reader or the sweep retries.
    await this.db
      .updateTable("oauth_tokens")
      .set({
        refresh_lease_until: isoIn(FAILURE_COOLDOWN_SECONDS),
        refresh_lease_owner: FAILED_PREFIX + this.leaseOwner,
        last_error: failure.message,
      })
      .where("id", "=", row.id)
      .where("refresh_lease_owner", "=", this.leaseOwner)
      .execute();
    this.log.warn({ tokenId: row.id, provider: row.provider_id, err: failure }, "token refresh failed");
    if (!this.isExpired(row)) return { kind: "ok", row, accessToken: openAccessToken(this.box, row) };
    if (failure.kind === "transient")
      throw new HttpError(
        503,
        `Provider ${row.provider_id} is unavailable for a token refresh (${failure.message}); retry later`,
        { "Retry-After": "5" },
      );
    throw new HttpError(502, `Provider ${row.provider_id} refused the token refresh: ${failure.message}`);
  }

  /**
   * Writes the refreshed set in one UPDATE, only while this process still holds the lease of the
   * generation it refreshed. A response without a refresh token keeps the stored one (providers
   * that do not rotate); a rotated one replaces it in the same statement as the access token.
   */
  private async storeRefreshed(row: TokenRow, tokens: TokenSet): Promise<FreshToken> {
    const now = nowIso();
    const res = await this.db
      .updateTable("oauth_tokens")
      .set((eb) => ({
        ...sealedTokenColumns(this.box, row.workspace_id, row.id, tokens),
        token_type: tokens.tokenType,
        expires_at: expiresAtFrom(tokens.expiresIn),
        ...(tokens.scopes ? { scopes: JSON.stringify(tokens.scopes) } : {}),
        status: "active",
        generation: eb("generation", "+", 1),
        refresh_lease_until: null,
        refresh_lease_owner: null,
        last_refreshed_at: now,
        last_error: null,
        updated_at: now,
      }))
      .where("id", "=", row.id)
      .where("generation", "=", row.generation)
      .where("refresh_lease_owner", "=", this.leaseOwner)
      .executeTakeFirst();
    if (Number(res.numUpdatedRows) !== 1)
      this.log.warn({ tokenId: row.id }, "refresh lease was lost before the refreshed token was stored");
    const fresh = await reloadToken(this.db, row.id);
    if (!fresh) throw new HttpError(404, "OAuth token not found");
    if (fresh.status !== "active") return { kind: "expired", row: fresh };
    this.log.info(
      { tokenId: row.id, provider: row.provider_id, rotated: tokens.refreshToken !== null },
      "token refreshed",
    );
    return { kind: "ok", row: fresh, accessToken: openAccessToken(this.box, fresh) };
  }

  /** Refreshes tokens that expire within the sweep window; returns how many it looked at. */
  async sweep(): Promise<number> {
    const now = nowIso();
    const due = await this.db
      .selectFrom("oauth_tokens")
      .selectAll()
      .where("status", "=", "active")
      .where("refresh_cipher", "is not", null)
      .where("expires_at", "is not", null)
      .where("expires_at", "<=", isoIn(this.settings.sweepWindowSeconds))
      .where((eb) => eb.or([eb("refresh_lease_until", "is", null), eb("refresh_lease_until", "<", now)]))
      .orderBy("expires_at")
      .limit(100)
      .execute();
    for (const row of due) {
      try {
        await this.fresh(row, this.settings.sweepWindowSeconds);
      } catch (err) {
        this.log.warn({ tokenId: row.id, err }, "sweep could not refresh a token");
      }
    }
    return due.length;
  }
}
