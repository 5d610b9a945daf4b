import type { WorkloadOwner } from "../../cluster/index.ts";
import type { RolloutEngine } from "../rollout/rollout-engine.ts";
import { UUIDISH } from "./schemas.ts";

const STABLE_URL = /^\/deployments\/([^/?#]+)(?:[/?#]|$)/;

/**
 * Replica mode: the stable URL of a deployment is served by the replica whose agent server runs
 * its live revision (the revision's lease holder), so a request that reaches another replica is
 * forwarded there instead of dialling a socket that only the owner's machine has.
 */
export function revisionOwner(engine: () => RolloutEngine): WorkloadOwner {
  return (target) => {
    const m = STABLE_URL.exec(target);
    if (!m || !UUIDISH.test(m[1])) return null;
    return engine()
      .route(m[1])
      .then((route) => (route.kind === "remote" && route.owner ? route.owner : null));
  };
}
