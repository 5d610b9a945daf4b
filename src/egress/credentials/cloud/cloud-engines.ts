import { createAwsSigningEngine, type AwsSigningEngine } from "./aws-signing-engine.ts";
import type { CloudAuditSink } from "./cloud-audit.ts";
import { googleCompatEnv, googleCompatFiles } from "./google-compat-credentials.ts";
import { createGoogleBearerEngine, type GoogleBearerEngine } from "./google-bearer-engine.ts";
import { parseServiceAccountJson } from "./google-service-account.ts";
import { awsCompatEnv, awsCompatFiles } from "./placeholder-credentials.ts";

/**
 * One sandbox's cloud engines, built from its (unsealed) `cloud_a` / `cloud_b` rules when the
 * proxy applies a config, plus the compatibility environment and files the sandbox gets. A
 * disabled rule yields no engine and no compatibility credentials.
 */
export interface CloudRulesInput {
  cloudA?: { enabled: boolean; accessKeyId: string; secretAccessKey: string } | null;
  cloudB?: { enabled: boolean; serviceAccountJson: string; scopes: string[] } | null;
}

export interface CloudEngineDeps {
  audit: CloudAuditSink;
  /** Outbound fetch for token endpoints (the proxy's dispatcher, with its address classification). */
  fetch?: typeof fetch;
  /** Operator-configured extra AWS endpoint suffixes. */
  awsExtraHostSuffixes?: readonly string[];
  maxBufferedPayloadBytes?: number;
}

export interface CloudEngines {
  aws: AwsSigningEngine | null;
  google: GoogleBearerEngine | null;
  /** Environment for every command in the sandbox. */
  env: Record<string, string>;
  /** Files to place in the sandbox (absolute path → content). */
  files: Record<string, string>;
  /** Identity the metadata emulator serves (null without an enabled cloud_b rule). */
  metadataIdentity: { clientEmail: string; projectId?: string; scopes: string[]; universeDomain: string } | null;
}

export function createCloudEngines(rules: CloudRulesInput, deps: CloudEngineDeps, homeDir = "/root"): CloudEngines {
  const out: CloudEngines = { aws: null, google: null, env: {}, files: {}, metadataIdentity: null };
  if (rules.cloudA?.enabled) {
    out.aws = createAwsSigningEngine({
      credentials: { accessKeyId: rules.cloudA.accessKeyId, secretAccessKey: rules.cloudA.secretAccessKey },
      audit: deps.audit,
      extraHostSuffixes: deps.awsExtraHostSuffixes,
      maxBufferedPayloadBytes: deps.maxBufferedPayloadBytes,
    });
    Object.assign(out.env, awsCompatEnv());
    Object.assign(out.files, awsCompatFiles(homeDir));
  }
  if (rules.cloudB?.enabled) {
    const serviceAccount = parseServiceAccountJson(rules.cloudB.serviceAccountJson);
    out.google = createGoogleBearerEngine({
      serviceAccount,
      scopes: rules.cloudB.scopes,
      audit: deps.audit,
      fetch: deps.fetch,
    });
    Object.assign(out.env, googleCompatEnv(serviceAccount));
    Object.assign(out.files, googleCompatFiles(serviceAccount));
    out.metadataIdentity = {
      clientEmail: serviceAccount.clientEmail,
      projectId: serviceAccount.projectId,
      scopes: rules.cloudB.scopes,
      universeDomain: serviceAccount.universeDomain,
    };
  }
  return out;
}
