/**
 * AWS compatibility placeholder credentials. Every sandbox with a `cloud_a` rule gets these fixed,
 * public, worthless values (environment and `~/.aws/credentials`) so that unmodified SDKs find
 * credentials and sign their requests; the proxy re-signs only requests whose `Credential=` names
 * this exact access key id, with the rule's real keys. The real keys never enter the sandbox.
 * No session token: the interface supports long-term keys only, and a token here would make SDKs
 * send `x-amz-security-token`, which the proxy would have to strip.
 */
export const AWS_PLACEHOLDER_ACCESS_KEY_ID = "AKIAWHARFPLACEHOLDER";
export const AWS_PLACEHOLDER_SECRET_ACCESS_KEY = "wharf/placeholder/secret/not+a+real+key0";

export function isAwsPlaceholderAccessKeyId(accessKeyId: string): boolean {
  return accessKeyId === AWS_PLACEHOLDER_ACCESS_KEY_ID;
}

/** Environment for the sandbox. IMDS is disabled so SDKs never probe 169.254.169.254 (blocked anyway). */
export function awsCompatEnv(): Record<string, string> {
  return {
    AWS_ACCESS_KEY_ID: AWS_PLACEHOLDER_ACCESS_KEY_ID,
    AWS_SECRET_ACCESS_KEY: AWS_PLACEHOLDER_SECRET_ACCESS_KEY,
    AWS_EC2_METADATA_DISABLED: "true",
  };
}

/** Files for the sandbox (absolute path → content), for tools that read the shared credentials file only. */
export function awsCompatFiles(homeDir = "/root"): Record<string, string> {
  const credentials = `[default]\naws_access_key_id = ${AWS_PLACEHOLDER_ACCESS_KEY_ID}\naws_secret_access_key = ${AWS_PLACEHOLDER_SECRET_ACCESS_KEY}\n`;
  return { [`${homeDir.replace(/\/+$/, "")}/.aws/credentials`]: credentials };
}
