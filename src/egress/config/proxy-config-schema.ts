import { z } from "zod";
import { parseAccessPattern } from "../policy/access-patterns.ts";
import { compileHostGlob } from "../policy/host-glob.ts";
import { compilePathPattern } from "../policy/path-patterns.ts";
import { headerValueProblem, SECRET_REF_SYNTAX } from "../credentials/header-values.ts";

// The `proxy_config` schema: every rule kind of the interface, validated with zod (`proxy-config.ts` explains the contract).

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

export function ruleKind(type: string | null | undefined): "header" | "cloud_a" | "cloud_b" {
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
