/**
 * The parts of a Google service-account JSON the proxy uses. The private key is the credential;
 * the email and project id are identifiers (the sandbox's compatibility file carries them too).
 */
export interface GoogleServiceAccount {
  clientEmail: string;
  privateKey: string;
  privateKeyId?: string;
  projectId?: string;
  tokenUri: string;
  universeDomain: string;
}

export const GOOGLE_DEFAULT_TOKEN_URI = "https://oauth2.googleapis.com/token";

/** Throws an Error naming the missing/invalid field (never echoing values). */
export function parseServiceAccountJson(text: string): GoogleServiceAccount {
  let json: Record<string, unknown>;
  try {
    json = JSON.parse(text) as Record<string, unknown>;
  } catch {
    throw new Error("service_account_json is not valid JSON");
  }
  if (typeof json !== "object" || json === null || Array.isArray(json))
    throw new Error("service_account_json must be a JSON object");
  if (json.type !== "service_account") throw new Error('service_account_json must have "type": "service_account"');
  const str = (k: string) =>
    typeof json[k] === "string" && (json[k] as string).length > 0 ? (json[k] as string) : undefined;
  const clientEmail = str("client_email");
  const privateKey = str("private_key");
  if (!clientEmail) throw new Error("service_account_json has no client_email");
  if (!privateKey || !privateKey.includes("PRIVATE KEY"))
    throw new Error("service_account_json has no PEM private_key");
  const tokenUri = str("token_uri") ?? GOOGLE_DEFAULT_TOKEN_URI;
  let parsed: URL;
  try {
    parsed = new URL(tokenUri);
  } catch {
    throw new Error("service_account_json token_uri is not a URL");
  }
  if (parsed.protocol !== "https:" && parsed.protocol !== "http:")
    throw new Error("service_account_json token_uri must be http(s)");
  return {
    clientEmail,
    privateKey,
    privateKeyId: str("private_key_id"),
    projectId: str("project_id"),
    tokenUri,
    universeDomain: str("universe_domain") ?? "googleapis.com",
  };
}
