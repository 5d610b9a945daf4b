import type { Kysely } from "kysely";
import type { SecretBox } from "../../crypto/secret-box.ts";
import { nowIso } from "../../store/database.ts";
import type { Database } from "../../store/schema.ts";
import { CA_RENEW_BEFORE_DAYS, createCa, type CaMaterial } from "./certificates.ts";
import "../egress-tables.ts";

const aad = (workspaceId: string) => `egress-ca:${workspaceId}`;

// Listed for key rotation as `egress.ca-key` in src/secrets/sealed-columns.ts.

/**
 * The workspace's interception CA: created on first use, renewed when it nears its end. The key is
 * sealed at rest and only ever held by the platform process; sandboxes get the certificate.
 * Concurrent creators (several platform processes) converge on one row: the insert does nothing
 * on conflict and everyone reads the winner.
 */
export async function workspaceCa(db: Kysely<Database>, box: SecretBox, workspaceId: string): Promise<CaMaterial> {
  const read = async () =>
    db.selectFrom("egress_cas").selectAll().where("workspace_id", "=", workspaceId).executeTakeFirst();
  let row = await read();
  const renewAt = Date.now() + CA_RENEW_BEFORE_DAYS * 24 * 3600 * 1000;
  if (!row || Date.parse(row.not_after) < renewAt) {
    const fresh = await createCa(`Wharf egress CA ${workspaceId.slice(-12)}`);
    const sealed = box.seal(fresh.keyPem, aad(workspaceId));
    const values = {
      workspace_id: workspaceId,
      cert_pem: fresh.certPem,
      key_id: sealed.keyId,
      key_ciphertext: sealed.blob,
      not_after: fresh.notAfter.toISOString(),
      created_at: nowIso(),
    };
    if (!row)
      await db
        .insertInto("egress_cas")
        .values(values)
        .onConflict((oc) => oc.column("workspace_id").doNothing())
        .execute();
    else
      await db
        .updateTable("egress_cas")
        .set(values)
        .where("workspace_id", "=", workspaceId)
        .where("cert_pem", "=", row.cert_pem)
        .execute();
    row = await read();
  }
  if (!row) throw new Error("egress CA could not be stored");
  return {
    certPem: row.cert_pem,
    keyPem: box.open({ keyId: row.key_id, blob: row.key_ciphertext }, aad(workspaceId)),
    notAfter: new Date(row.not_after),
  };
}
