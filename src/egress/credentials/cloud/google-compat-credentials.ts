import crypto from "node:crypto";
import type { GoogleServiceAccount } from "./google-service-account.ts";

/**
 * What the sandbox gets for a `cloud_b` rule so unmodified Google client libraries send requests
 * at all: a service-account file with the real (non-secret) email and project id but a throwaway
 * private key, and the variables that point every tool at it. Client libraries then either ask the
 * token endpoint (answered by the proxy with `GOOGLE_COMPAT_ACCESS_TOKEN`) or sign a self-signed
 * JWT with the throwaway key; either way the proxy replaces the `Authorization` on the way to a
 * Google API host, so nothing the sandbox holds is ever worth anything outside it.
 */
export const GOOGLE_COMPAT_ACCESS_TOKEN = "wharf-placeholder-google-access-token";
export const GOOGLE_COMPAT_PRIVATE_KEY_ID = "wharf-placeholder";
export const GOOGLE_COMPAT_CREDENTIALS_PATH = "/etc/wharf/google-service-account.json";

let throwawayKey: string | null = null;

/** One throwaway RSA key per proxy process (RSA-2048 generation costs ~100 ms; the key is worthless). */
function throwawayPrivateKey(): string {
  if (!throwawayKey) {
    const { privateKey } = crypto.generateKeyPairSync("rsa", { modulusLength: 2048 });
    throwawayKey = privateKey.export({ type: "pkcs8", format: "pem" }).toString();
  }
  return throwawayKey;
}

export function googleCompatServiceAccountJson(real: GoogleServiceAccount): string {
  return `${JSON.stringify(
    {
      type: "service_account",
      project_id: real.projectId ?? "",
      private_key_id: GOOGLE_COMPAT_PRIVATE_KEY_ID,
      private_key: throwawayPrivateKey(),
      client_email: real.clientEmail,
      client_id: "",
      auth_uri: "https://accounts.google.com/o/oauth2/auth",
      token_uri: "https://oauth2.googleapis.com/token",
      universe_domain: real.universeDomain,
    },
    null,
    2,
  )}\n`;
}

/** Environment for the sandbox (client libraries, gcloud's credential override, project id). */
export function googleCompatEnv(
  real: GoogleServiceAccount,
  path = GOOGLE_COMPAT_CREDENTIALS_PATH,
): Record<string, string> {
  const env: Record<string, string> = {
    GOOGLE_APPLICATION_CREDENTIALS: path,
    CLOUDSDK_AUTH_CREDENTIAL_FILE_OVERRIDE: path,
  };
  if (real.projectId) {
    env.GOOGLE_CLOUD_PROJECT = real.projectId;
    env.GCLOUD_PROJECT = real.projectId;
    env.CLOUDSDK_CORE_PROJECT = real.projectId;
  }
  return env;
}

export function googleCompatFiles(
  real: GoogleServiceAccount,
  path = GOOGLE_COMPAT_CREDENTIALS_PATH,
): Record<string, string> {
  return { [path]: googleCompatServiceAccountJson(real) };
}

/** The proxy's answer to a sandbox's token-endpoint request (never forwarded upstream). */
export function googleCompatTokenResponse(): { status: number; headers: Record<string, string>; body: string } {
  return {
    status: 200,
    headers: { "content-type": "application/json; charset=utf-8", "cache-control": "no-store" },
    body: JSON.stringify({ access_token: GOOGLE_COMPAT_ACCESS_TOKEN, expires_in: 3599, token_type: "Bearer" }),
  };
}
