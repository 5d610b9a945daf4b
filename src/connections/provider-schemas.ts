import { z } from "zod";

export const PROVIDER_ID_PATTERN = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/;
export const providerId = z
  .string()
  .regex(
    PROVIDER_ID_PATTERN,
    "Provider ids are 1-64 characters: letters, digits, _ . - and start with a letter or digit",
  );

const LOOPBACK = /^(localhost|127(\.\d{1,3}){3}|\[::1\])$/i;

/**
 * A provider endpoint: https anywhere, plain http only on loopback (local development and tests).
 * The server calls these URLs itself, so a cleartext hop elsewhere would expose codes and secrets.
 */
export const endpointUrl = z
  .string()
  .max(2048)
  .refine((v) => {
    try {
      const u = new URL(v);
      return u.protocol === "https:" || (u.protocol === "http:" && LOOPBACK.test(u.hostname));
    } catch {
      return false;
    }
  }, "Must be an https:// URL (http:// only for localhost)");

export const TOKEN_ENDPOINT_AUTH_METHODS = ["none", "client_secret_basic", "client_secret_post"] as const;
export const ACCOUNT_LABEL_SOURCES = ["userinfo", "id_token", "none"] as const;

/** Parameters the flow sets itself; a provider's extra authorize parameters may not override them. */
const RESERVED_AUTHORIZE_PARAMS = new Set([
  "client_id",
  "redirect_uri",
  "response_type",
  "scope",
  "state",
  "code_challenge",
  "code_challenge_method",
  "nonce",
]);
const extraAuthorizeParams = z
  .record(
    z.string().regex(/^[A-Za-z0-9_.-]{1,64}$/, "Parameter names are 1-64 characters: letters, digits, _ . -"),
    z.string().max(1024),
  )
  .refine((r) => Object.keys(r).length <= 20, "At most 20 extra authorize parameters")
  .refine(
    (r) => !Object.keys(r).some((k) => RESERVED_AUTHORIZE_PARAMS.has(k)),
    `These are set by the flow and cannot be overridden: ${[...RESERVED_AUTHORIZE_PARAMS].join(", ")}`,
  );

const common = {
  name: z.string().trim().min(1).max(200),
  client_id: z.string().min(1).max(1024),
  client_secret: z.string().min(1).max(8192).nullish(),
  auth_url: endpointUrl,
  token_url: endpointUrl,
  revocation_url: endpointUrl.nullish(),
  userinfo_url: endpointUrl.nullish(),
  /** The issuer of id_tokens; needed to read the account label from an id_token. */
  issuer: z.string().url().max(2048).nullish(),
  uses_pkce: z.boolean(),
  code_challenge_method: z.literal("S256").nullish(),
  token_endpoint_auth_method: z.enum(TOKEN_ENDPOINT_AUTH_METHODS),
  scope_separator: z.string().min(1).max(3),
  extra_authorize_params: extraAuthorizeParams,
  account_label_source: z.enum(ACCOUNT_LABEL_SOURCES).nullish(),
  account_label_claim: z.string().min(1).max(100).nullish(),
  provider_type: z.enum(["microsoft", "salesforce", "slack"]).nullish(),
};

export const providerCreateBody = z
  .object({
    provider_id: providerId,
    ...common,
    uses_pkce: common.uses_pkce.default(true),
    token_endpoint_auth_method: common.token_endpoint_auth_method.default("client_secret_post"),
    scope_separator: common.scope_separator.default(" "),
    extra_authorize_params: common.extra_authorize_params.default({}),
  })
  .strict();
export type ProviderCreateBody = z.infer<typeof providerCreateBody>;

/** Every field optional; null on a required field means "unchanged", as in LangSmith Deployment's PATCH. */
export const providerPatchBody = z
  .object({
    name: common.name.nullish(),
    client_id: common.client_id.nullish(),
    client_secret: common.client_secret,
    auth_url: common.auth_url.nullish(),
    token_url: common.token_url.nullish(),
    revocation_url: common.revocation_url,
    userinfo_url: common.userinfo_url,
    issuer: common.issuer,
    uses_pkce: common.uses_pkce.nullish(),
    code_challenge_method: common.code_challenge_method,
    token_endpoint_auth_method: common.token_endpoint_auth_method.nullish(),
    scope_separator: common.scope_separator.nullish(),
    extra_authorize_params: common.extra_authorize_params.nullish(),
    account_label_source: common.account_label_source,
    account_label_claim: common.account_label_claim,
    provider_type: common.provider_type,
  })
  .strict();
export type ProviderPatchBody = z.infer<typeof providerPatchBody>;

export const providerResponse = z.object({
  id: z.string(),
  organization_id: z.string(),
  provider_id: z.string(),
  name: z.string(),
  client_id: z.string(),
  has_client_secret: z.boolean(),
  auth_url: z.string(),
  token_url: z.string(),
  revocation_url: z.string().nullable(),
  userinfo_url: z.string().nullable(),
  issuer: z.string().nullable(),
  uses_pkce: z.boolean(),
  code_challenge_method: z.string().nullable(),
  provider_type: z.string().nullable(),
  mcp_server_url: z.string().nullable(),
  token_endpoint_auth_method: z.string(),
  is_dynamic_client: z.boolean(),
  scope_separator: z.string(),
  extra_authorize_params: z.record(z.string(), z.string()),
  account_label_source: z.string(),
  account_label_claim: z.string().nullable(),
  redirect_uri: z.string(),
  created_at: z.string(),
  updated_at: z.string(),
});
export type ProviderResponse = z.infer<typeof providerResponse>;
