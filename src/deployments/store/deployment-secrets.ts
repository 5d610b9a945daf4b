import type { SecretBox } from "../../crypto/secret-box.ts";

export interface DeploymentSecret {
  name: string;
  value: string;
}

/** Associated data binding a deployment's sealed secrets (and its sealed API key) to its row. */
export const secretsAad = (workspaceId: string, deploymentId: string) =>
  `deployment-secrets:${workspaceId}:${deploymentId}`;
export const apiKeyAad = (workspaceId: string, deploymentId: string) =>
  `deployment-api-key:${workspaceId}:${deploymentId}`;

// Listed for key rotation as `deployments.secrets` and `deployments.api-key` in src/secrets/sealed-columns.ts.

export function sealSecrets(box: SecretBox, workspaceId: string, deploymentId: string, secrets: DeploymentSecret[]) {
  const sealed = box.seal(JSON.stringify(secrets), secretsAad(workspaceId, deploymentId));
  return {
    secrets_key_id: sealed.keyId,
    secrets_ciphertext: sealed.blob,
    secret_names: JSON.stringify(secrets.map((s) => s.name)),
  };
}

export function openSecrets(
  box: SecretBox,
  row: { workspace_id: string; id: string; secrets_key_id: string; secrets_ciphertext: string },
): DeploymentSecret[] {
  return JSON.parse(
    box.open({ keyId: row.secrets_key_id, blob: row.secrets_ciphertext }, secretsAad(row.workspace_id, row.id)),
  ) as DeploymentSecret[];
}

export function openApiKey(
  box: SecretBox,
  row: { workspace_id: string; id: string; api_key_key_id: string; api_key_ciphertext: string },
): string {
  return box.open({ keyId: row.api_key_key_id, blob: row.api_key_ciphertext }, apiKeyAad(row.workspace_id, row.id));
}

/**
 * Applies a PATCH's `secrets` list to the current ones: the list replaces the set, and an entry
 * whose value is null keeps the current value of that name (so a GET → edit → PATCH round trip,
 * where values read back as null, does not erase anything).
 */
export function mergeSecrets(
  current: DeploymentSecret[],
  patch: Array<{ name: string; value: string | null }>,
): { secrets: DeploymentSecret[]; unknown: number[] } {
  const byName = new Map(current.map((s) => [s.name, s.value]));
  const unknown: number[] = [];
  const secrets = patch.flatMap((s, i) => {
    if (s.value !== null) return [{ name: s.name, value: s.value }];
    const kept = byName.get(s.name);
    if (kept === undefined) {
      unknown.push(i);
      return [];
    }
    return [{ name: s.name, value: kept }];
  });
  return { secrets, unknown };
}

export function sameSecrets(a: DeploymentSecret[], b: DeploymentSecret[]): boolean {
  const norm = (x: DeploymentSecret[]) => JSON.stringify([...x].sort((p, q) => (p.name < q.name ? -1 : 1)));
  return norm(a) === norm(b);
}
