import { z } from "zod";
import { ValidationFailed, type ValidationIssue } from "../../http/errors.ts";
import { toValidationIssues } from "../../http/validation.ts";
import { listSecrets, readSecretValues } from "../../secrets/secret-store.ts";
import { parseAccessPattern } from "../policy/access-patterns.ts";
import { compileHostGlob } from "../policy/host-glob.ts";
import { compilePathPattern } from "../policy/path-patterns.ts";
import { headerValueProblem, secretRefs, SECRET_REF_SYNTAX } from "../credentials/header-values.ts";
import { sealValue } from "../credentials/sealed-values.ts";
import type { StoredConfigV1, StoredHeader, StoredRule, StoredSecret } from "./stored-config.ts";
import "../egress-tables.ts";

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

const MAX_RULES = 100;
const MAX_HEADERS = 50;
const MAX_LIST = 1000;
export const DEFAULT_CALLBACK_TTL_SECONDS = 300;

function refineWith(check: (v: string) => void) {
  return (value: string, ctx: z.RefinementCtx) => {
    try {
      check(value);
    } catch (err) {
      ctx.addIssue({ code: "custom", message: (err as Error).message });
    }
  };
}

const hostGlob = z.string().superRefine(refineWith((v) => void compileHostGlob(v)));
const pathPattern = z.string().superRefine(refineWith((v) => void compilePathPattern(v)));
const accessPattern = z.string().superRefine(refineWith((v) => void parseAccessPattern(v)));

const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,128}$/;
/** Headers the proxy owns: framing, routing and hop-by-hop; injecting them would break or smuggle. */
export const RESERVED_HEADER_NAMES = new Set([
  "host",
  "content-length",
  "transfer-encoding",
  "connection",
  "keep-alive",
  "proxy-connection",
  "proxy-authorization",
  "proxy-authenticate",
  "te",
  "trailer",
  "upgrade",
  "expect",
]);

const headerName = z
  .string()
  .regex(HEADER_NAME, "Header names are 1-128 token characters (RFC 9110)")
  .refine((n) => !RESERVED_HEADER_NAMES.has(n.toLowerCase()), {
    message: "This header is managed by the proxy and cannot be injected",
  });

const headerSchema = z
  .object({
    name: headerName,
    type: z.enum(["workspace_secret", "plaintext", "opaque"]),
    value: z.string().max(8192),
  })
  .strict()
  .superRefine((h, ctx) => {
    const problem = headerValueProblem(h.type, h.value);
    if (problem) ctx.addIssue({ code: "custom", message: problem, path: ["value"] });
  });

const secretValue = z
  .object({
    type: z.string(),
    value: z
      .string()
      .min(1)
      .max(64 * 1024),
  })
  .strict()
  .superRefine((s, ctx) => {
    if (s.type === "plaintext") {
      ctx.addIssue({
        code: "custom",
        path: ["type"],
        message: "plaintext values are not accepted for cloud credentials; use workspace_secret or opaque",
      });
    } else if (s.type !== "workspace_secret" && s.type !== "opaque") {
      ctx.addIssue({ code: "custom", path: ["type"], message: "must be workspace_secret or opaque" });
    } else if (s.type === "workspace_secret" && !new RegExp(`^${SECRET_REF_SYNTAX}$`).test(s.value)) {
      ctx.addIssue({
        code: "custom",
        path: ["value"],
        message: "a workspace_secret credential is exactly one {KEY} reference",
      });
    }
  });

const cloudACreds = z.object({ access_key_id: secretValue, secret_access_key: secretValue }).strict();
const scope = z
  .string()
  .min(1)
  .max(512)
  .regex(/^[\x21-\x7e]+$/, "OAuth scopes are non-empty strings without spaces");
const cloudBCreds = z
  .object({
    service_account_json: secretValue,
    scopes: z
      .array(scope)
      .max(100)
      .refine((s) => s.length > 0, { message: "must be a non-empty list of OAuth scopes" }),
  })
  .strict();

const envVarName = z
  .string()
  .regex(/^[A-Za-z_][A-Za-z0-9_]{0,127}$/, "Environment variable names are letters, digits and _");

const ruleSchema = z
  .object({
    name: z
      .string()
      .min(1)
      .max(128)
      .regex(/^[^\p{Cc}]+$/u, "Rule names must not contain control characters"),
    type: z.enum(["header", "cloud_a", "cloud_b", "aws", "gcp"]).nullish(),
    enabled: z.boolean().nullish(),
    match_hosts: z.array(hostGlob).max(MAX_LIST).nullish(),
    match_paths: z.array(pathPattern).max(MAX_LIST).nullish(),
    headers: z.array(headerSchema).max(MAX_HEADERS).nullish(),
    env_vars: z
      .record(
        envVarName,
        z
          .string()
          .max(4096)
          .refine((v) => !v.includes("\u0000"), { message: "must not contain NUL" }),
      )
      .nullish(),
    cloud_a: cloudACreds.nullish(),
    aws: cloudACreds.nullish(),
    cloud_b: cloudBCreds.nullish(),
    gcp: cloudBCreds.nullish(),
  })
  .strict()
  .superRefine((r, ctx) => {
    const kind = ruleKind(r.type);
    const set = (v: unknown) => v !== undefined && v !== null && !(Array.isArray(v) && v.length === 0);
    const issue = (path: Array<string | number>, message: string) => ctx.addIssue({ code: "custom", path, message });
    if (kind === "header") {
      for (const k of ["cloud_a", "aws", "cloud_b", "gcp"] as const)
        if (set(r[k]))
          issue([k], `only a rule of type ${k === "aws" ? "cloud_a" : k === "gcp" ? "cloud_b" : k} may carry ${k}`);
      if (!set(r.match_hosts)) issue(["match_hosts"], "a header rule needs at least one host in match_hosts");
      if (!set(r.headers)) issue(["headers"], "a header rule needs at least one header");
      const seen = new Set<string>();
      (r.headers ?? []).forEach((h, i) => {
        const lower = h.name.toLowerCase();
        if (seen.has(lower)) issue(["headers", i, "name"], `header ${h.name} is listed twice in this rule`);
        seen.add(lower);
      });
      return;
    }
    for (const k of ["match_hosts", "match_paths", "headers"] as const) {
      if (set(r[k])) issue([k], `must not be set on a ${kind} rule (its host matching is built in)`);
    }
    const [own, alias, others] =
      kind === "cloud_a"
        ? (["cloud_a", "aws", ["cloud_b", "gcp"]] as const)
        : (["cloud_b", "gcp", ["cloud_a", "aws"]] as const);
    for (const k of others) if (set(r[k])) issue([k], `a ${kind} rule cannot carry ${k}`);
    if (set(r[own]) && set(r[alias])) issue([alias], `give the credentials under ${own} only`);
    else if (!set(r[own]) && !set(r[alias])) issue([own], `a ${kind} rule needs its credentials under ${own}`);
  });

function ruleKind(type: string | null | undefined): "header" | "cloud_a" | "cloud_b" {
  if (type === "cloud_a" || type === "aws") return "cloud_a";
  if (type === "cloud_b" || type === "gcp") return "cloud_b";
  return "header";
}

const callbackSchema = z
  .object({
    match_hosts: z
      .array(hostGlob)
      .max(MAX_LIST)
      .refine((h) => h.length > 0, { message: "a callback needs at least one host in match_hosts" }),
    url: z
      .string()
      .max(2048)
      .superRefine(
        refineWith((v) => {
          let u: URL;
          try {
            u = new URL(v);
          } catch {
            throw new Error("not a valid URL");
          }
          if (u.protocol !== "http:" && u.protocol !== "https:")
            throw new Error("callback URL must be http:// or https://");
          if (u.username || u.password) throw new Error("callback URL must not carry credentials; use request_headers");
          if (u.hash) throw new Error("callback URL must not have a fragment");
        }),
      ),
    request_headers: z.array(headerSchema).max(MAX_HEADERS).nullish(),
    ttl_seconds: z
      .number()
      .int()
      .min(60, "ttl_seconds must be between 60 and 3600")
      .max(3600, "ttl_seconds must be between 60 and 3600")
      .nullish(),
    full_request: z.boolean().nullish(),
  })
  .strict()
  .superRefine((cb, ctx) => {
    (cb.request_headers ?? []).forEach((h, i) => {
      if (h.type === "workspace_secret")
        ctx.addIssue({
          code: "custom",
          path: ["request_headers", i, "type"],
          message: "callback request_headers accept only plaintext and opaque values",
        });
      if (h.name.toLowerCase() === "content-type")
        ctx.addIssue({
          code: "custom",
          path: ["request_headers", i, "name"],
          message: "the callback request's Content-Type is always application/json",
        });
    });
    if (cb.full_request)
      ctx.addIssue({
        code: "custom",
        path: ["full_request"],
        message: "full_request is not supported: callbacks receive only host and port",
      });
  });

const accessControlSchema = z
  .object({
    allow_list: z.array(accessPattern).max(MAX_LIST).nullish(),
    deny_list: z.array(accessPattern).max(MAX_LIST).nullish(),
  })
  .strict()
  .superRefine((ac, ctx) => {
    const allow = ac.allow_list !== undefined && ac.allow_list !== null;
    const deny = ac.deny_list !== undefined && ac.deny_list !== null;
    if (allow && deny)
      ctx.addIssue({
        code: "custom",
        message: "access_control holds exactly one of allow_list or deny_list, not both",
      });
    if (!allow && !deny)
      ctx.addIssue({ code: "custom", message: "access_control holds exactly one of allow_list or deny_list" });
  });

export const proxyConfigSchema = z
  .object({
    rules: z.array(ruleSchema).max(MAX_RULES).nullish(),
    callbacks: z.array(callbackSchema).max(MAX_RULES).nullish(),
    access_control: accessControlSchema.nullish(),
    no_proxy: z.array(hostGlob).max(MAX_LIST).nullish(),
  })
  .strict()
  .superRefine((cfg, ctx) => {
    const rules = cfg.rules ?? [];
    const names = new Map<string, number>();
    let cloudA = -1;
    let cloudB = -1;
    rules.forEach((r, i) => {
      if (names.has(r.name))
        ctx.addIssue({
          code: "custom",
          path: ["rules", i, "name"],
          message: `rule name ${JSON.stringify(r.name)} is already used by rule ${names.get(r.name)}`,
        });
      else names.set(r.name, i);
      const kind = ruleKind(r.type);
      if (kind === "cloud_a") {
        if (cloudA >= 0)
          ctx.addIssue({
            code: "custom",
            path: ["rules", i],
            message: `at most one cloud_a rule per sandbox (rule ${cloudA} is one)`,
          });
        else cloudA = i;
      }
      if (kind === "cloud_b" && r.enabled !== false) {
        if (cloudB >= 0)
          ctx.addIssue({
            code: "custom",
            path: ["rules", i],
            message: `at most one enabled cloud_b rule per sandbox (rule ${cloudB} is one)`,
          });
        else cloudB = i;
      }
    });
  });

export type ProxyConfigInput = z.infer<typeof proxyConfigSchema>;

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
