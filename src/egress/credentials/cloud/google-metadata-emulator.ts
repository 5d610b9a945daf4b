import { GOOGLE_COMPAT_ACCESS_TOKEN } from "./google-compat-credentials.ts";
import { headerValue, type HeaderPairs } from "./header-pairs.ts";

/**
 * A GCE metadata-server stand-in for tools that only know the metadata path (gcloud on "GCE",
 * gsutil, Terraform, any gcp-metadata user with GCE_METADATA_HOST pointed at the proxy). The proxy
 * serves it itself for `metadata.google.internal` / `169.254.169.254`, which egress classification
 * blocks for every forwarded connection. Tokens it hands out are the dummy compatibility token;
 * the proxy swaps in the real one on the way to Google API hosts.
 */
export interface MetadataIdentity {
  clientEmail: string;
  projectId?: string;
  scopes: string[];
  universeDomain: string;
}

export interface MetadataResponse {
  status: number;
  headers: Record<string, string>;
  body: string;
}

const PREFIX = "/computeMetadata/v1/";

export function handleMetadataRequest(
  method: string,
  target: string,
  headers: HeaderPairs,
  id: MetadataIdentity,
): MetadataResponse {
  const text = (status: number, body: string, type = "application/text"): MetadataResponse => ({
    status,
    headers: { "metadata-flavor": "Google", "content-type": type, server: "Metadata Server for VM" },
    body,
  });
  const json = (value: unknown) => text(200, JSON.stringify(value), "application/json");
  if (method !== "GET" && method !== "HEAD") return text(405, "method not allowed\n");
  const q = target.indexOf("?");
  const path = q === -1 ? target : target.slice(0, q);
  const query = new URLSearchParams(q === -1 ? "" : target.slice(q + 1));
  if (path === "/" || path === "") return text(200, "computeMetadata/\n");
  // As on GCE: requests must say Metadata-Flavor: Google and must not come through a proxy.
  if (headerValue(headers, "metadata-flavor")?.trim() !== "Google")
    return text(403, "Missing required header: Metadata-Flavor\n");
  if (headerValue(headers, "x-forwarded-for") !== undefined) return text(403, "Forbidden\n");
  if (!path.startsWith(PREFIX) && `${path}/` !== PREFIX) return text(404, "not found\n");
  const rest = path.slice(PREFIX.length).replace(/\/+$/, "");
  const accountMatch = /^instance\/service-accounts\/([^/]+)(?:\/(.*))?$/.exec(rest);
  if (rest === "") return text(200, "instance/\nproject/\nuniverse/\n");
  if (rest === "instance") return text(200, "service-accounts/\n");
  if (rest === "instance/service-accounts") return text(200, `default/\n${id.clientEmail}/\n`);
  if (rest === "project/project-id") return id.projectId ? text(200, id.projectId) : text(404, "not found\n");
  if (rest === "universe/universe-domain") return text(200, id.universeDomain);
  if (accountMatch) {
    const [, account, leaf = ""] = accountMatch;
    if (account !== "default" && decodeOrNull(account) !== id.clientEmail) return text(404, "not found\n");
    if (leaf === "" && query.get("recursive") === "true")
      return json({ aliases: ["default"], email: id.clientEmail, scopes: id.scopes });
    if (leaf === "") return text(200, "aliases\nemail\nidentity\nscopes\ntoken\n");
    if (leaf === "email") return text(200, id.clientEmail);
    if (leaf === "aliases") return text(200, "default\n");
    if (leaf === "scopes") return text(200, `${id.scopes.join("\n")}\n`);
    if (leaf === "token")
      return json({ access_token: GOOGLE_COMPAT_ACCESS_TOKEN, expires_in: 3599, token_type: "Bearer" });
    // ID tokens (Cloud Run, IAP) need an audience-bound token signed by Google: not emulated.
    return text(404, "not found\n");
  }
  return text(404, "not found\n");
}

function decodeOrNull(s: string): string | null {
  try {
    return decodeURIComponent(s);
  } catch {
    return null;
  }
}
