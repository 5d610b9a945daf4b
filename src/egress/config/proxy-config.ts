import { ValidationFailed, type ValidationIssue } from "../../http/errors.ts";
import { toValidationIssues } from "../../http/validation.ts";
import { listSecrets, readSecretValues } from "../../secrets/secret-store.ts";
import { headerValueProblem, secretRefs, SECRET_REF_SYNTAX } from "../credentials/header-values.ts";
import { sealValue } from "../credentials/sealed-values.ts";
import type { StoredConfigV1, StoredHeader, StoredRule, StoredSecret } from "./stored-config.ts";
import "../egress-tables.ts";
import {
  DEFAULT_CALLBACK_TTL_SECONDS,
  proxyConfigSchema,
  ruleKind,
  type ProxyConfigInput,
} from "./proxy-config-schema.ts";

export {
  DEFAULT_CALLBACK_TTL_SECONDS,
  proxyConfigSchema,
  RESERVED_HEADER_NAMES,
  type ProxyConfigInput,
} from "./proxy-config-schema.ts";

/**
 * CONTRACT between sandboxes and the egress proxy (with its cloud credential engines).
 *
 * The sandboxes API parses `proxy_config` with `proxyConfigSchema` (for the 422 `loc`s), then calls
 * `prepareProxyConfig` to check what zod cannot (workspace secret references exist), seal `opaque`
 * values, and get the stored form; `presentProxyConfig` gives the API response form (opaque values
 * never, `{"type":"opaque","is_set":true}`).
 *
 * Every rule kind of the interface is validated here, including those whose behaviour comes from
 * the cloud credential engines (`cloud_a`, `cloud_b`, callbacks), so the API is complete. LangSmith Deployment's names
 * `aws`/`gcp` are accepted as aliases and stored under the interface's names.
 */

/** What is stored in the database (a JSON text column): opaque values sealed, never plain. */
export type StoredProxyConfig = Record<string, unknown>;

export interface ProxyConfigDeps {
  db: import("kysely").Kysely<import("../../store/schema.ts").Database>;
  box: import("../../crypto/secret-box.ts").SecretBox;
}

const LOC = ["body", "proxy_config"] as const;

/** Throws ValidationFailed (422) with `loc` under `["body","proxy_config",...]` on a bad config. */
export async function prepareProxyConfig(
  deps: ProxyConfigDeps,
  workspaceId: string,
  input: ProxyConfigInput,
): Promise<StoredProxyConfig> {
  // Parse again: callers may hand the raw object; this also makes the function safe on its own.
  const parsed = proxyConfigSchema.safeParse(input ?? {});
  if (!parsed.success) {
    throw new ValidationFailed(
      toValidationIssues("body", parsed.error, input).map((i) => ({ ...i, loc: [...LOC, ...i.loc.slice(1)] })),
    );
  }
  const cfg = parsed.data;

  // Every {KEY} reference, with where it was written.
  const refs: Array<{ key: string; loc: Array<string | number> }> = [];
  (cfg.rules ?? []).forEach((r, i) => {
    (r.headers ?? []).forEach((h, j) => {
      if (h.type === "workspace_secret")
        for (const key of secretRefs(h.value)) refs.push({ key, loc: [...LOC, "rules", i, "headers", j, "value"] });
    });
    const creds = credsOf(r);
    for (const [field, s] of Object.entries(creds?.secrets ?? {})) {
      if (s.type === "workspace_secret")
        refs.push({ key: secretRefs(s.value)[0], loc: [...LOC, "rules", i, creds!.key, field, "value"] });
    }
  });
  const keys = [...new Set(refs.map((r) => r.key))];
  const existing = new Set((await listSecrets(deps.db, workspaceId, keys)).map((s) => s.key));
  const issues: ValidationIssue[] = refs
    .filter((r) => !existing.has(r.key))
    .map((r) => ({
      loc: r.loc,
      msg: `Value error, workspace secret ${r.key} does not exist (create it with PUT /v2/secrets first)`,
      type: "value_error",
    }));
  if (issues.length) throw new ValidationFailed(issues);

  // Resolved values must be usable where they go (a header value cannot carry CR/LF; a service
  // account must parse). Checked now so a bad secret is a 422, not a silent failure later.
  const values = await readSecretValues(deps.db, deps.box, workspaceId, keys);
  (cfg.rules ?? []).forEach((r, i) => {
    (r.headers ?? []).forEach((h, j) => {
      if (h.type !== "workspace_secret") return;
      const resolved = h.value.replace(new RegExp(SECRET_REF_SYNTAX, "g"), (_m, k: string) => values.get(k) ?? "");
      const problem = headerValueProblem("plaintext", resolved);
      if (problem)
        issues.push({
          loc: [...LOC, "rules", i, "headers", j, "value"],
          msg: `Value error, the resolved secret value is not a valid header value: ${problem}`,
          type: "value_error",
        });
    });
    const creds = credsOf(r);
    if (creds?.key === "cloud_b" || creds?.key === "gcp") {
      const s = creds.secrets.service_account_json;
      const json = s.type === "opaque" ? s.value : (values.get(secretRefs(s.value)[0]) ?? "");
      const problem = serviceAccountProblem(json);
      if (problem)
        issues.push({
          loc: [...LOC, "rules", i, creds.key, "service_account_json", "value"],
          msg: `Value error, ${problem}`,
          type: "value_error",
        });
    }
  });
  if (issues.length) throw new ValidationFailed(issues);

  const stored = await toStoredConfig(cfg, (value) => sealValue(deps, workspaceId, value));
  return stored as unknown as StoredProxyConfig;
}

/**
 * The stored form of a validated config: aliases folded into the interface's names, defaults
 * filled in, opaque values replaced by what `seal` returns (the id of their sealed row).
 */
export async function toStoredConfig(
  cfg: ProxyConfigInput,
  seal: (value: string) => Promise<string>,
): Promise<StoredConfigV1> {
  const sealHeader = async (h: { name: string; type: string; value: string }): Promise<StoredHeader> =>
    h.type === "opaque"
      ? { name: h.name, type: "opaque", ref: await seal(h.value) }
      : { name: h.name, type: h.type as "plaintext" | "workspace_secret", value: h.value };
  const sealSecret = async (s: { type: string; value: string }): Promise<StoredSecret> =>
    s.type === "opaque" ? { type: "opaque", ref: await seal(s.value) } : { type: "workspace_secret", value: s.value };

  const rules: StoredRule[] = [];
  for (const r of cfg.rules ?? []) {
    const kind = ruleKind(r.type);
    const enabled = r.enabled ?? true;
    if (kind === "header") {
      rules.push({
        name: r.name,
        type: "header",
        enabled,
        match_hosts: r.match_hosts ?? [],
        match_paths: r.match_paths ?? [],
        headers: await Promise.all((r.headers ?? []).map(sealHeader)),
        ...(r.env_vars && Object.keys(r.env_vars).length ? { env_vars: r.env_vars } : {}),
      });
    } else if (kind === "cloud_a") {
      const c = (r.cloud_a ?? r.aws)!;
      rules.push({
        name: r.name,
        type: "cloud_a",
        enabled,
        cloud_a: {
          access_key_id: await sealSecret(c.access_key_id),
          secret_access_key: await sealSecret(c.secret_access_key),
        },
        ...(r.env_vars && Object.keys(r.env_vars).length ? { env_vars: r.env_vars } : {}),
      });
    } else {
      const c = (r.cloud_b ?? r.gcp)!;
      rules.push({
        name: r.name,
        type: "cloud_b",
        enabled,
        cloud_b: { service_account_json: await sealSecret(c.service_account_json), scopes: c.scopes },
        ...(r.env_vars && Object.keys(r.env_vars).length ? { env_vars: r.env_vars } : {}),
      });
    }
  }
  const callbacks = [];
  for (const cb of cfg.callbacks ?? []) {
    callbacks.push({
      match_hosts: cb.match_hosts,
      url: cb.url,
      ttl_seconds: cb.ttl_seconds ?? DEFAULT_CALLBACK_TTL_SECONDS,
      request_headers: await Promise.all((cb.request_headers ?? []).map(sealHeader)),
    });
  }
  const ac = cfg.access_control;
  const stored: StoredConfigV1 = {
    version: 1,
    rules,
    callbacks,
    access_control: ac ? (ac.allow_list ? { allow_list: ac.allow_list } : { deny_list: ac.deny_list ?? [] }) : null,
    no_proxy: cfg.no_proxy ?? [],
  };
  return stored;
}

function credsOf(
  r: NonNullable<ProxyConfigInput["rules"]>[number],
): { key: "cloud_a" | "aws" | "cloud_b" | "gcp"; secrets: Record<string, { type: string; value: string }> } | null {
  for (const key of ["cloud_a", "aws"] as const) {
    const c = r[key];
    if (c) return { key, secrets: { access_key_id: c.access_key_id, secret_access_key: c.secret_access_key } };
  }
  for (const key of ["cloud_b", "gcp"] as const) {
    const c = r[key];
    if (c) return { key, secrets: { service_account_json: c.service_account_json } };
  }
  return null;
}

/** What is wrong with a service-account JSON for token minting, or null when it is usable. */
export function serviceAccountProblem(json: string): string | null {
  let sa: unknown;
  try {
    sa = JSON.parse(json);
  } catch {
    return "service_account_json is not valid JSON";
  }
  if (!sa || typeof sa !== "object" || Array.isArray(sa)) return "service_account_json must be a JSON object";
  const o = sa as Record<string, unknown>;
  if (typeof o.client_email !== "string" || !o.client_email) return "service_account_json has no client_email";
  if (typeof o.private_key !== "string" || !o.private_key.includes("PRIVATE KEY"))
    return "service_account_json has no PEM private_key";
  if (o.token_uri !== undefined && (typeof o.token_uri !== "string" || !/^https?:\/\//.test(o.token_uri)))
    return "service_account_json token_uri must be an http(s) URL";
  return null;
}

/** The API response form: plaintext as given, references as written, opaque values never. */
export function presentProxyConfig(stored: StoredProxyConfig | null): Record<string, unknown> | null {
  if (!stored) return null;
  const cfg = stored as unknown as StoredConfigV1;
  if (cfg.version !== 1) return null;
  const header = (h: StoredHeader) =>
    h.type === "opaque"
      ? { name: h.name, type: "opaque", is_set: true }
      : { name: h.name, type: h.type, value: h.value };
  const secret = (s: StoredSecret) =>
    s.type === "opaque" ? { type: "opaque", is_set: true } : { type: s.type, value: s.value };
  return {
    rules: cfg.rules.map((r) => {
      const env = r.env_vars ? { env_vars: r.env_vars } : {};
      if (r.type === "header")
        return {
          name: r.name,
          type: null,
          enabled: r.enabled,
          match_hosts: r.match_hosts,
          match_paths: r.match_paths,
          headers: r.headers.map(header),
          ...env,
        };
      if (r.type === "cloud_a")
        return {
          name: r.name,
          type: "cloud_a",
          enabled: r.enabled,
          cloud_a: {
            access_key_id: secret(r.cloud_a.access_key_id),
            secret_access_key: secret(r.cloud_a.secret_access_key),
          },
          ...env,
        };
      return {
        name: r.name,
        type: "cloud_b",
        enabled: r.enabled,
        cloud_b: { service_account_json: secret(r.cloud_b.service_account_json), scopes: r.cloud_b.scopes },
        ...env,
      };
    }),
    callbacks: cfg.callbacks.map((c) => ({
      match_hosts: c.match_hosts,
      url: c.url,
      ttl_seconds: c.ttl_seconds,
      request_headers: c.request_headers.map(header),
    })),
    access_control: cfg.access_control,
    no_proxy: cfg.no_proxy,
  };
}
