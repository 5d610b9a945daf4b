import type { Kysely, Selectable } from "kysely";
import type { SecretBox } from "../crypto/secret-box.ts";
import { conflict, invalidAt, notFound } from "../http/errors.ts";
import { nowIso } from "../store/database.ts";
import { newId } from "../store/ids.ts";
import type { Database } from "../store/schema.ts";
import type { OAuthProvidersTable } from "./connection-tables.ts";
import type { ProviderCreateBody, ProviderPatchBody, ProviderResponse } from "./provider-schemas.ts";
import { clientSecretAad } from "./sealed-columns.ts";

export type ProviderRow = Selectable<OAuthProvidersTable>;

/** A provider with its client secret opened, for the OAuth client; never leaves the server. */
export interface ProviderWithSecret {
  row: ProviderRow;
  clientSecret: string | null;
}

/** The callback URL to register at the provider. */
export const callbackUrl = (publicBaseUrl: string, providerId: string) =>
  `${publicBaseUrl}/v2/auth/callback/${encodeURIComponent(providerId)}`;

export function toProviderResponse(row: ProviderRow, publicBaseUrl: string): ProviderResponse {
  return {
    id: row.id,
    organization_id: row.workspace_id,
    provider_id: row.provider_id,
    name: row.name,
    client_id: row.client_id,
    has_client_secret: row.client_secret_cipher !== null,
    auth_url: row.auth_url,
    token_url: row.token_url,
    revocation_url: row.revocation_url,
    userinfo_url: row.userinfo_url,
    issuer: row.issuer,
    uses_pkce: row.uses_pkce === 1,
    code_challenge_method: row.uses_pkce === 1 ? row.code_challenge_method : null,
    provider_type: row.provider_type,
    mcp_server_url: null,
    token_endpoint_auth_method: row.token_endpoint_auth_method,
    is_dynamic_client: false,
    scope_separator: row.scope_separator,
    extra_authorize_params: JSON.parse(row.extra_authorize_params) as Record<string, string>,
    account_label_source: row.account_label_source,
    account_label_claim: row.account_label_claim,
    redirect_uri: callbackUrl(publicBaseUrl, row.provider_id),
    created_at: row.created_at,
    updated_at: row.updated_at,
  };
}

/** The label source when none is given: the id_token if an issuer is declared, else userinfo if known. */
function defaultLabelSource(issuer: string | null | undefined, userinfoUrl: string | null | undefined): string {
  if (issuer) return "id_token";
  if (userinfoUrl) return "userinfo";
  return "none";
}

/**
 * Cross-field rules zod cannot express on one field; checked on the merged result of a create or
 * a patch, so a patch cannot leave a provider in a state the create would refuse.
 */
function checkConsistency(p: {
  token_endpoint_auth_method: string;
  has_secret: boolean;
  uses_pkce: boolean;
  account_label_source: string;
  userinfo_url: string | null;
  issuer: string | null;
}): void {
  if (p.token_endpoint_auth_method !== "none" && !p.has_secret) {
    throw invalidAt(
      ["body", "client_secret"],
      `Value error, client_secret is required when token_endpoint_auth_method is ${p.token_endpoint_auth_method}`,
    );
  }
  if (p.token_endpoint_auth_method === "none" && !p.uses_pkce) {
    throw invalidAt(
      ["body", "uses_pkce"],
      "Value error, a public client (token_endpoint_auth_method none) must use PKCE",
    );
  }
  if (p.account_label_source === "userinfo" && !p.userinfo_url)
    throw invalidAt(["body", "userinfo_url"], "Value error, account_label_source userinfo needs userinfo_url");
  if (p.account_label_source === "id_token" && !p.issuer)
    throw invalidAt(["body", "issuer"], "Value error, account_label_source id_token needs issuer");
}

export async function createProvider(
  db: Kysely<Database>,
  box: SecretBox,
  workspaceId: string,
  body: ProviderCreateBody,
): Promise<ProviderRow> {
  const labelSource = body.account_label_source ?? defaultLabelSource(body.issuer, body.userinfo_url);
  // A public client sends no secret; a secret given anyway is not kept (it would never be used).
  const secret = body.token_endpoint_auth_method === "none" ? null : (body.client_secret ?? null);
  checkConsistency({
    ...body,
    has_secret: secret !== null,
    account_label_source: labelSource,
    userinfo_url: body.userinfo_url ?? null,
    issuer: body.issuer ?? null,
  });
  const id = newId();
  const sealed = secret === null ? null : box.seal(secret, clientSecretAad(workspaceId, id));
  const now = nowIso();
  const row: ProviderRow = {
    id,
    workspace_id: workspaceId,
    provider_id: body.provider_id,
    name: body.name,
    client_id: body.client_id,
    client_secret_key_id: sealed?.keyId ?? null,
    client_secret_cipher: sealed?.blob ?? null,
    auth_url: body.auth_url,
    token_url: body.token_url,
    revocation_url: body.revocation_url ?? null,
    userinfo_url: body.userinfo_url ?? null,
    issuer: body.issuer ?? null,
    uses_pkce: body.uses_pkce ? 1 : 0,
    code_challenge_method: "S256",
    token_endpoint_auth_method: body.token_endpoint_auth_method,
    scope_separator: body.scope_separator,
    extra_authorize_params: JSON.stringify(body.extra_authorize_params),
    account_label_source: labelSource,
    account_label_claim: body.account_label_claim ?? null,
    provider_type: body.provider_type ?? null,
    created_at: now,
    updated_at: now,
  };
  const res = await db
    .insertInto("oauth_providers")
    .values(row)
    .onConflict((oc) => oc.columns(["workspace_id", "provider_id"]).doNothing())
    .returning("id")
    .executeTakeFirst();
  if (!res) throw conflict(`OAuth provider ${body.provider_id} already exists`);
  return row;
}

export async function listProviders(db: Kysely<Database>, workspaceId: string): Promise<ProviderRow[]> {
  return db
    .selectFrom("oauth_providers")
    .selectAll()
    .where("workspace_id", "=", workspaceId)
    .orderBy("provider_id")
    .execute();
}

export async function getProvider(db: Kysely<Database>, workspaceId: string, providerId: string): Promise<ProviderRow> {
  const row = await db
    .selectFrom("oauth_providers")
    .selectAll()
    .where("workspace_id", "=", workspaceId)
    .where("provider_id", "=", providerId)
    .executeTakeFirst();
  if (!row) throw notFound("OAuth provider");
  return row;
}

export function openProviderSecret(box: SecretBox, row: ProviderRow): ProviderWithSecret {
  const clientSecret =
    row.client_secret_cipher && row.client_secret_key_id
      ? box.open(
          { keyId: row.client_secret_key_id, blob: row.client_secret_cipher },
          clientSecretAad(row.workspace_id, row.id),
        )
      : null;
  return { row, clientSecret };
}

export async function patchProvider(
  db: Kysely<Database>,
  box: SecretBox,
  workspaceId: string,
  providerId: string,
  body: ProviderPatchBody,
): Promise<ProviderRow> {
  const current = await getProvider(db, workspaceId, providerId);
  const pick = <T>(v: T | null | undefined, old: T): T => (v === undefined || v === null ? old : v);
  // Optional fields: absent keeps the value, null clears it.
  const optional = <T>(v: T | null | undefined, old: T | null): T | null => (v === undefined ? old : v);
  const method = pick(body.token_endpoint_auth_method, current.token_endpoint_auth_method);
  let sealed: { keyId: string | null; blob: string | null } = {
    keyId: current.client_secret_key_id,
    blob: current.client_secret_cipher,
  };
  if (method === "none") sealed = { keyId: null, blob: null };
  else if (body.client_secret) {
    const s = box.seal(body.client_secret, clientSecretAad(workspaceId, current.id));
    sealed = { keyId: s.keyId, blob: s.blob };
  }
  const issuer = optional(body.issuer, current.issuer);
  const userinfoUrl = optional(body.userinfo_url, current.userinfo_url);
  const labelSource =
    body.account_label_source === undefined
      ? current.account_label_source
      : (body.account_label_source ?? defaultLabelSource(issuer, userinfoUrl));
  const usesPkce = pick(body.uses_pkce, current.uses_pkce === 1);
  checkConsistency({
    token_endpoint_auth_method: method,
    has_secret: sealed.blob !== null,
    uses_pkce: usesPkce,
    account_label_source: labelSource,
    userinfo_url: userinfoUrl,
    issuer,
  });
  const updated = {
    name: pick(body.name, current.name),
    client_id: pick(body.client_id, current.client_id),
    client_secret_key_id: sealed.keyId,
    client_secret_cipher: sealed.blob,
    auth_url: pick(body.auth_url, current.auth_url),
    token_url: pick(body.token_url, current.token_url),
    revocation_url: optional(body.revocation_url, current.revocation_url),
    userinfo_url: userinfoUrl,
    issuer,
    uses_pkce: usesPkce ? 1 : 0,
    token_endpoint_auth_method: method,
    scope_separator: pick(body.scope_separator, current.scope_separator),
    extra_authorize_params: body.extra_authorize_params
      ? JSON.stringify(body.extra_authorize_params)
      : current.extra_authorize_params,
    account_label_source: labelSource,
    account_label_claim: optional(body.account_label_claim, current.account_label_claim),
    provider_type: optional(body.provider_type, current.provider_type),
    updated_at: nowIso(),
  };
  // Conditional on the row we read, so two concurrent patches cannot interleave field by field.
  const res = await db
    .updateTable("oauth_providers")
    .set(updated)
    .where("id", "=", current.id)
    .where("updated_at", "=", current.updated_at)
    .executeTakeFirst();
  if (Number(res.numUpdatedRows) === 0) throw conflict("OAuth provider was changed concurrently; retry");
  return { ...current, ...updated };
}

export async function deleteProviderRow(
  db: Kysely<Database>,
  workspaceId: string,
  providerId: string,
): Promise<boolean> {
  const res = await db
    .deleteFrom("oauth_providers")
    .where("workspace_id", "=", workspaceId)
    .where("provider_id", "=", providerId)
    .executeTakeFirst();
  return Number(res.numDeletedRows) > 0;
}
