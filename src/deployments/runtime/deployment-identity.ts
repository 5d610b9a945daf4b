import crypto from "node:crypto";
import type { PlatformContext } from "../../platform/context.ts";
import type { Database } from "../../store/schema.ts";
import { DEPLOYMENT_UID_BASE } from "../confinement/confinement.ts";

type Deployment = Database["deployments"];

/** What a deployment's processes run as and seal with. */
export interface DeploymentIdentity {
  uid: number;
  /** The deployment's own agent-server key (base64), its agent server's WHARF_MASTER_KEY. */
  agentKey: string;
}

export const agentKeyAad = (workspaceId: string, deploymentId: string) =>
  `deployment-agent-key:${workspaceId}:${deploymentId}`;

/** The deployment's uid and agent key, allocated on first use (unique across processes). */
export async function deploymentIdentity(ctx: PlatformContext, deployment: Deployment): Promise<DeploymentIdentity> {
  const db = ctx.db;
  let row = deployment;
  for (let attempt = 0; row.run_uid === null && attempt < 20; attempt++) {
    const max = await db
      .selectFrom("deployments")
      .select((eb) => eb.fn.max("run_uid").as("m"))
      .executeTakeFirst();
    const uid = Math.max(DEPLOYMENT_UID_BASE, Number(max?.m ?? 0) + 1);
    try {
      await db
        .updateTable("deployments")
        .set({ run_uid: uid })
        .where("id", "=", row.id)
        .where("run_uid", "is", null)
        .execute();
    } catch {
      // Another process took that uid for another deployment at the same moment: try the next.
    }
    row = (await db.selectFrom("deployments").selectAll().where("id", "=", row.id).executeTakeFirst()) ?? row;
  }
  const uid = row.run_uid;
  if (uid === null) throw new Error("could not allocate a uid for the deployment");
  if (!row.agent_key_ciphertext) {
    const sealed = ctx.box.seal(crypto.randomBytes(32).toString("base64"), agentKeyAad(row.workspace_id, row.id));
    await db
      .updateTable("deployments")
      .set({ agent_key_key_id: sealed.keyId, agent_key_ciphertext: sealed.blob })
      .where("id", "=", row.id)
      .where("agent_key_ciphertext", "is", null)
      .execute();
    row = (await db.selectFrom("deployments").selectAll().where("id", "=", row.id).executeTakeFirst()) ?? row;
  }
  const agentKey = ctx.box.open(
    { keyId: row.agent_key_key_id!, blob: row.agent_key_ciphertext! },
    agentKeyAad(row.workspace_id, row.id),
  );
  return { uid, agentKey };
}
