import type { AuditEvent } from "../audit/audit-log.ts";
import {
  awsRefusalResponse,
  CallbackResolutionError,
  CallbackResolver,
  createCloudEngines,
  type CallbackSpec,
  type CloudAuditEvent,
  type CloudEngines,
  type HeaderPairs,
  isAwsHost,
  isGoogleApiHost,
} from "./cloud/index.ts";
import type { AuthorizeOutcome, OutboundRequest, RequestAuthorizer } from "../proxy/egress-proxy.ts";
import type { AuthorizerFactory, EgressRuntime } from "../egress-runtime.ts";
import type { EgressSettings } from "../egress-settings.ts";
import type { TargetChecker } from "../proxy/target-checker.ts";
import { SandboxPolicy } from "../policy/policy.ts";
import { createCheckedFetch, DestinationBlocked } from "./checked-fetch.ts";

/**
 * The adapter between the egress proxy and the cloud credential engines:
 * builds one sandbox's engines from its live policy (attach, every PATCH) and runs them per
 * request in the order of docs/egress-cloud.md: header rules first (a static rule that matched
 * skips everything here), then `cloud_a`, `cloud_b`, then the first matching callback.
 */
export function installCloudAuthorizers(rt: EgressRuntime): void {
  rt.authorizerFactory = createCloudAuthorizerFactory(rt);
}

/** What the engines need of the proxy: its resolver and address check, and the upstream roots. */
export interface EngineDeps {
  targets: TargetChecker;
  settings: EgressSettings;
}

type Audit = Parameters<AuthorizerFactory>[2];
type Problems = { a: string | null; b: string | null };
type Event = Omit<AuditEvent, "sandboxId" | "workspaceId">;

/** The sandbox user's home (src/confinement/base-image.ts `SANDBOX_USER`): where `~/.aws/credentials` goes. */
const SANDBOX_HOME = "/home/user";

export function createCloudAuthorizerFactory(rt: EngineDeps, homeDir = SANDBOX_HOME): AuthorizerFactory {
  const checkedFetch = createCheckedFetch(rt);
  return (_sandbox, policy, audit) => {
    const creds = policy.cloudCredentials();
    const names = { a: creds.cloudA?.name ?? "cloud_a", b: creds.cloudB?.name ?? "cloud_b" };
    const sink = (e: CloudAuditEvent) => audit(auditEventFor(e, names));
    // The engines' own dials, refused by the address check, are this sandbox's blocks too.
    const proxyFetch = (async (input: string | URL | Request, init?: RequestInit) => {
      try {
        return await checkedFetch(input, init);
      } catch (err) {
        if (err instanceof DestinationBlocked)
          audit({
            kind: "block",
            decision: "blocked",
            rule: "engine fetch",
            host: err.host,
            port: err.port,
            reason: err.message,
          });
        throw err;
      }
    }) as typeof fetch;
    let engines: CloudEngines;
    const problems: Problems = { a: null, b: null };
    const a = creds.cloudA;
    const b = creds.cloudB;
    const cloudA =
      a && a.accessKeyId !== null && a.secretAccessKey !== null
        ? { enabled: true, accessKeyId: a.accessKeyId, secretAccessKey: a.secretAccessKey }
        : null;
    const cloudB =
      b && b.serviceAccountJson !== null
        ? { enabled: true, serviceAccountJson: b.serviceAccountJson, scopes: b.scopes }
        : null;
    if (a && !cloudA) problems.a = a.name;
    if (b && !cloudB) problems.b = b.name;
    try {
      engines = createCloudEngines({ cloudA, cloudB }, { audit: sink, fetch: proxyFetch }, homeDir);
    } catch (err) {
      // A service-account JSON that no longer parses: nothing for cloud_b, its hosts fail closed below.
      problems.b = names.b;
      audit({
        kind: "credential",
        decision: "failed",
        rule: names.b,
        host: "",
        port: 0,
        reason: `service account JSON: ${(err as Error).message}`.slice(0, 300),
      });
      engines = createCloudEngines({ cloudA, cloudB: null }, { audit: sink, fetch: proxyFetch }, homeDir);
    }
    // Without a cloud rule or a callback the engine can only ever pass: no authorizer at all, so a
    // sandbox with header rules alone pays nothing per request for it.
    if (!a && !b && policy.callbacks.length === 0) return { authorizers: [], env: engines.env, files: engines.files };
    const callbacks = new CallbackResolver({ fetch: proxyFetch as never, audit: sink });
    const specs = callbackSpecs(policy);
    const google = engines.google;
    const authorizer: RequestAuthorizer = {
      name: "cloud",
      authorize: (req) => authorize(req, engines, policy, callbacks, specs, problems, audit),
      // Static rules win here too: a header rule for the token host means the operator wants it forwarded.
      answerLocally: google
        ? (req) => {
            if (policy.headerRuleFor(req.host, pathOf(req.target))) return null;
            const local = google.localAnswer({
              method: req.method,
              host: req.host.host,
              target: req.target,
              headers: req.headers,
            });
            return local && { action: "respond", ...local };
          }
        : undefined,
    };
    return { authorizers: [authorizer], env: engines.env, files: engines.files };
  };
}

async function authorize(
  req: OutboundRequest,
  engines: CloudEngines,
  policy: SandboxPolicy,
  callbacks: CallbackResolver,
  specs: Map<number, CallbackSpec | null>,
  problems: Problems,
  audit: Audit,
): Promise<AuthorizeOutcome> {
  // Static rules win: a header rule that matched this request leaves it alone.
  if (req.staticRule) return { action: "pass" };
  const host = req.host.host;
  // A cloud rule whose credential cannot be resolved fails closed on its hosts (never forwarded unsigned).
  const unavailable =
    problems.a && isAwsHost(host) ? problems.a : problems.b && isGoogleApiHost(host) ? problems.b : null;
  if (unavailable) {
    audit({
      kind: "credential",
      decision: "failed",
      rule: unavailable,
      host,
      port: req.port,
      method: req.method,
      reason: "credential unavailable",
    });
    req.body?.resume();
    return text(502, `egress: credential for rule ${unavailable} is unavailable`);
  }
  if (engines.aws) {
    const out = await engines.aws.handle({
      method: req.method,
      host,
      target: req.target,
      headers: req.headers,
      body: req.body,
    });
    if (out.action === "refuse") {
      req.body?.resume();
      return { action: "respond", ...awsRefusalResponse(out.refusal) };
    }
    if (out.action === "signed") return { action: "forward", headers: out.headers, body: out.body };
  }
  if (engines.google) {
    const out = await engines.google.handle({ method: req.method, host, target: req.target, headers: req.headers });
    if (out.action === "respond") return out;
    if (out.action === "inject") return { action: "forward", headers: out.headers, body: req.body };
    if (out.action === "error") return text(502, `egress: ${out.error.publicMessage}`);
  }
  const rule = policy.callbackFor(req.host);
  if (!rule) return { action: "pass" };
  const spec = specs.get(rule.index) ?? null;
  try {
    if (!spec)
      throw new CallbackResolutionError(
        "invalid_headers",
        "a request header of the callback cannot be resolved (sealed value missing)",
      );
    const injected = await callbacks.resolve(spec, host, req.port);
    return { action: "forward", headers: replaceAll(req.headers, injected), body: req.body };
  } catch (err) {
    if (!(err instanceof CallbackResolutionError)) throw err;
    if (!spec)
      audit({
        kind: "callback",
        decision: "failed",
        rule: `callback ${rule.index}`,
        host,
        port: req.port,
        method: req.method,
        reason: err.message,
      });
    req.body?.resume();
    return text(502, `egress: ${err.publicMessage}`);
  }
}

function text(status: number, message: string): AuthorizeOutcome {
  return { action: "respond", status, headers: { "content-type": "text/plain; charset=utf-8" }, body: `${message}\n` };
}

/** The client's headers with every copy of an injected name replaced by the injected value. */
function replaceAll(headers: HeaderPairs, injected: Record<string, string>): HeaderPairs {
  const names = new Set(Object.keys(injected).map((n) => n.toLowerCase()));
  const out: HeaderPairs = headers.filter(([n]) => !names.has(n.toLowerCase()));
  for (const [n, v] of Object.entries(injected)) out.push([n, v]);
  return out;
}

/**
 * Callback specs as the resolver wants them, one object per callback and build (the resolver's
 * cache is keyed by the object, so a PATCH starts from an empty cache). The policy resolved the
 * request headers (plaintext as given, opaque unsealed; the schema accepts no other kind for
 * callbacks); a value that could not be resolved leaves no spec and the callback fails closed.
 */
function callbackSpecs(policy: SandboxPolicy): Map<number, CallbackSpec | null> {
  const out = new Map<number, CallbackSpec | null>();
  for (const r of policy.callbacks)
    out.set(
      r.index,
      r.requestHeaders
        ? {
            url: r.url,
            ttlSeconds: r.ttlSeconds,
            requestHeaders: r.requestHeaders.map((h) => ({ name: h.name, value: h.value })),
          }
        : null,
    );
  return out;
}

/** Cloud engine events as egress log rows (never a value: names, hosts, outcomes, timings). */
// eslint-disable-next-line max-lines-per-function -- a table: one literal row per engine event kind, read side by side
function auditEventFor(e: CloudAuditEvent, names: { a: string; b: string }): Event {
  const ms = (n: number) => `${Math.round(n)} ms`;
  switch (e.kind) {
    case "aws_signed":
      return {
        kind: "sign",
        decision: "signed",
        rule: names.a,
        host: e.host,
        port: 443,
        method: e.method,
        path: e.path,
        reason: `${e.service} ${e.region} ${e.payloadMode}`,
      };
    case "aws_refused":
      return {
        kind: "sign",
        decision: "refused",
        rule: names.a,
        host: e.host,
        port: 443,
        method: e.method,
        path: e.path,
        reason: `${e.reason}: ${e.message}`,
      };
    case "aws_stream_failed":
      return {
        kind: "sign",
        decision: "failed",
        rule: names.a,
        host: e.host,
        port: 443,
        path: e.path,
        reason: `${e.reason}: ${e.message}`,
      };
    case "google_token_minted":
      return {
        kind: "sign",
        decision: "signed",
        rule: names.b,
        host: "token endpoint",
        port: 443,
        reason: `access token minted for ${e.clientEmail} in ${ms(e.latencyMs)}`,
      };
    case "google_token_failed":
      return {
        kind: "credential",
        decision: "failed",
        rule: names.b,
        host: "token endpoint",
        port: 443,
        reason: `token mint failed for ${e.clientEmail}: ${e.message}`.slice(0, 300),
      };
    case "google_bearer":
      return {
        kind: "inject",
        decision: "injected",
        rule: names.b,
        host: e.host,
        port: 443,
        method: e.method,
        path: e.path,
        reason: `bearer token (${e.cache})`,
      };
    case "google_compat_token":
      return {
        kind: "inject",
        decision: "injected",
        rule: names.b,
        host: e.host,
        port: 443,
        path: e.path,
        reason: "token endpoint answered by the proxy",
      };
    case "callback_call":
      return {
        kind: "callback",
        decision: e.outcome === "ok" ? "injected" : "failed",
        rule: "callback",
        host: e.host,
        port: e.port,
        status: e.status,
        reason: `${e.callbackUrl} ${e.outcome}${e.reason ? ` (${e.reason})` : ""} in ${ms(e.latencyMs)}`,
      };
    case "callback_cache":
      return {
        kind: "callback",
        decision: "allowed",
        rule: "callback",
        host: e.host,
        port: e.port,
        reason: `cache ${e.cache}`,
      };
  }
}

function pathOf(target: string): string {
  const q = target.indexOf("?");
  return q < 0 ? target : target.slice(0, q);
}
