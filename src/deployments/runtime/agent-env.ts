import type { Database } from "../../store/schema.ts";
import { hostVariable } from "../../config/index.ts";
import type { DeploymentIdentity } from "./deployment-identity.ts";
import type { RuntimeDeps } from "./runtime-deps.ts";

type Deployment = Database["deployments"];

/**
 * The agent server's whole environment: the deployment's secrets and its own identifiers and key.
 * Nothing of the platform's (no WHARF_HOME, DATABASE_URL, master key, host variables).
 */
export function agentEnv(
  rt: RuntimeDeps,
  deployment: Deployment,
  revisionId: string,
  secrets: Array<{ name: string; value: string }>,
  ident: DeploymentIdentity,
  stateDir: string,
): Record<string, string> {
  const env: Record<string, string> = { PATH: "/usr/bin:/bin", LANG: hostVariable("LANG") ?? "C.UTF-8" };
  const tz = hostVariable("TZ");
  if (tz) env.TZ = tz;
  for (const s of secrets) env[s.name] = s.value;
  const level = rt.ctx.config.logLevel;
  Object.assign(env, {
    NODE_ENV: "production",
    HOME: stateDir,
    WHARF_LOG_LEVEL: level === "debug" || level === "trace" ? "info" : level,
    WHARF_DEPLOYMENT_ID: deployment.id,
    WHARF_REVISION_ID: revisionId,
    WHARF_WORKSPACE_ID: deployment.workspace_id,
    WHARF_MASTER_KEY: ident.agentKey,
  });
  // Runs' webhooks: confined, every connection already meets the egress proxy's address policy;
  // unconfined, the server checks them against the same policy with the operator's settings.
  const s = rt.ctx.config.settings;
  if (rt.isolated) env.WHARF_AGENT_EGRESS_PROXIED = "1";
  else
    Object.assign(env, {
      WHARF_EGRESS_ALLOW_INTERNAL: s.WHARF_EGRESS_ALLOW_INTERNAL.join(","),
      WHARF_EGRESS_HOSTS: s.WHARF_EGRESS_HOSTS,
      WHARF_EGRESS_SYSTEM_DNS: s.WHARF_EGRESS_SYSTEM_DNS ? "1" : "0",
    });
  return env;
}
