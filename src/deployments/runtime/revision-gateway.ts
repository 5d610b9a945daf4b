import net from "node:net";
import type { Database } from "../../store/schema.ts";
import { serverTimeouts } from "../../http/connection-guard.ts";
import { DataPlaneGateway, deploymentUser, GATEWAY_URL, newGatewayKey } from "./data-plane-gateway.ts";
import type { RuntimeDeps } from "./runtime-deps.ts";

type Deployment = Database["deployments"];

/** The revision's data-plane gateway, opened by its fresh key alone (on a loopback port when unconfined). */
export async function openGateway(rt: RuntimeDeps, deployment: Deployment, revisionId: string) {
  const userId = await deploymentUser(rt.ctx.db, deployment.api_key_id);
  if (!userId) throw new Error("the deployment's owner is gone");
  const key = newGatewayKey();
  const gateway = new DataPlaneGateway(
    { deploymentId: deployment.id, revisionId, workspaceId: deployment.workspace_id, userId, key },
    {
      baseUrl: () => rt.ctx.baseUrl(),
      box: rt.ctx.box,
      limits: {
        maxConnections: rt.ctx.config.settings.WHARF_MAX_CONNECTIONS_PER_CLIENT,
        timeouts: serverTimeouts(rt.ctx.config.settings),
      },
    },
  );
  let gatewayUrl = GATEWAY_URL;
  if (!rt.isolated) {
    // No network namespace: the gateway listens on a loopback port of the host instead.
    const l = net.createServer();
    await new Promise<void>((resolve, reject) => l.once("error", reject).listen(0, "127.0.0.1", () => resolve()));
    gateway.attach(l);
    gatewayUrl = `http://127.0.0.1:${(l.address() as net.AddressInfo).port}`;
  }
  return { gateway, key, gatewayUrl };
}
