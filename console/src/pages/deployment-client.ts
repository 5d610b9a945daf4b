/**
 * How the playground and the Studio reach a deployment's agent server: its stable URL on the
 * console's origin, with either a short-lived platform token (developer access) or an end user's
 * token for the project's own auth handler.
 */
import { useEffect, useMemo, useState } from "react";
import { Client } from "@langchain/langgraph-sdk";
import { api, sessionHeaders } from "../api.ts";

export type AuthMode = "platform" | "custom";
export interface DeploymentAuth {
  mode: AuthMode;
  /** The end user's token, without the `Bearer ` prefix (one typed or pasted is dropped). */
  token: string;
}

/** `Bearer abc`, `bearer  abc` or `abc` → `abc`: the page adds the scheme itself. */
export const bareToken = (typed: string) =>
  typed
    .trim()
    .replace(/^bearer\s+/i, "")
    .trim();

/**
 * Headers for the deployment. "platform" sends a bearer token from `POST /v2/tokens` with
 * `x-auth-scheme: langsmith`, the way LangGraph Studio reaches a deployment with custom auth;
 * "custom" sends `Authorization: Bearer <token>` once a token is typed (nothing is sent before).
 */
export function useDeploymentHeaders(auth: DeploymentAuth) {
  const [headers, setHeaders] = useState<Record<string, string> | null>(null);
  const [error, setError] = useState<unknown>(null);
  useEffect(() => {
    let alive = true;
    let timer: ReturnType<typeof setTimeout> | undefined;
    setError(null);
    const refresh = async () => {
      if (auth.mode === "custom") return setHeaders(auth.token ? { authorization: `Bearer ${auth.token}` } : null);
      try {
        const t = await api<{ access_token: string }>("/v2/tokens", {
          method: "POST",
          json: { expires_in_seconds: 900 },
        });
        if (alive) setHeaders({ authorization: `Bearer ${t.access_token}`, "x-auth-scheme": "langsmith" });
        timer = setTimeout(() => void refresh(), 600_000);
      } catch (e) {
        if (alive) setError(e);
      }
    };
    void refresh();
    return () => {
      alive = false;
      clearTimeout(timer);
    };
  }, [auth.mode, auth.token]);
  return { headers, error };
}

export const deploymentUrl = (deploymentId: string) => `${location.origin}/deployments/${deploymentId}`;

/** The official SDK client for a deployment, or null until its headers are known. */
export function useDeploymentClient(
  deploymentId: string | undefined,
  headers: Record<string, string> | null,
): Client | null {
  return useMemo(
    () =>
      headers && deploymentId
        ? new Client({
            apiUrl: deploymentUrl(deploymentId),
            defaultHeaders: { ...headers, "x-wharf-csrf": sessionHeaders()["x-wharf-csrf"] },
          })
        : null,
    [headers, deploymentId],
  );
}
