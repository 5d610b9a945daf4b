import { interrupt } from "@langchain/langgraph";
import { readSetting } from "../config/index.ts";

/**
 * The runtime side of agent connections, for graph code: a node asks for a fresh access token of
 * its agent's connection, and when there is none (or it needs re-authentication) the run pauses
 * with a LangGraph interrupt carrying the OAuth URL. After the person connects, resuming the run
 * (with any value) re-runs the node, which then gets the token.
 *
 *     const token = await getAccessToken({ provider: "github", scopes: ["repo"], config });
 *
 * `config` is the node's run config: the agent id is the assistant id the agent server puts in
 * `config.configurable.assistant_id`, the owner the authenticated end user
 * (`langgraph_auth_user_id`) when custom auth is on. The platform URL and API key come from
 * `WHARF_URL` and `WHARF_API_KEY` unless given.
 */

export interface RunConfigLike {
  configurable?: Record<string, unknown>;
  metadata?: Record<string, unknown>;
}

export interface AccessTokenRequest {
  provider: string;
  scopes: string[];
  config?: RunConfigLike;
  agentId?: string;
  userId?: string;
  /** Pick one of several accounts of the provider. */
  tokenId?: string;
  platformUrl?: string;
  apiKey?: string;
  tenantId?: string;
  /** After a resume, how long to wait for the flow the person was shown (seconds, default 20). */
  waitSeconds?: number;
}

/** What the interrupt carries: enough for a client to show the link and resume afterwards. */
export interface ConnectionInterrupt {
  type: "wharf.connection_required";
  provider: string;
  status: "pending" | "connection_required" | "token_expired";
  url: string;
  auth_id: string;
  message: string;
}

export class ConnectionError extends Error {}

interface AuthenticateAnswer {
  status: "completed" | "pending" | "connection_required" | "token_expired";
  url: string | null;
  auth_id: string | null;
  token: string | null;
}

const str = (v: unknown) => (typeof v === "string" && v ? v : undefined);

function resolve(req: AccessTokenRequest) {
  const configurable = req.config?.configurable ?? {};
  const metadata = req.config?.metadata ?? {};
  const platformUrl = (req.platformUrl ?? readSetting("WHARF_URL") ?? "http://127.0.0.1:8123").replace(/\/+$/, "");
  const apiKey = req.apiKey ?? readSetting("WHARF_API_KEY");
  const tenantId = req.tenantId ?? readSetting("WHARF_TENANT_ID");
  if (!apiKey) throw new ConnectionError("no Wharf API key: set WHARF_API_KEY for the agent, or pass apiKey");
  return {
    platformUrl,
    headers: {
      "x-api-key": apiKey,
      "content-type": "application/json",
      ...(tenantId ? { "x-tenant-id": tenantId } : {}),
    },
    agentId: req.agentId ?? str(configurable.assistant_id) ?? str(metadata.assistant_id),
    userId: req.userId ?? str(configurable.langgraph_auth_user_id),
  };
}

async function call<T>(url: string, init: RequestInit): Promise<T> {
  let res: Response;
  try {
    res = await fetch(url, { ...init, signal: AbortSignal.timeout(60_000) });
  } catch (err) {
    throw new ConnectionError(`cannot reach Wharf at ${new URL(url).origin}: ${(err as Error).message}`, {
      cause: err,
    });
  }
  const text = await res.text();
  if (!res.ok)
    throw new ConnectionError(
      `${init.method ?? "GET"} ${new URL(url).pathname} failed with ${res.status}: ${text.slice(0, 300)}`,
    );
  return JSON.parse(text) as T;
}

/** One `POST /v2/auth/authenticate`, without any interrupt: for code outside a graph. */
export async function authenticateConnection(req: AccessTokenRequest): Promise<AuthenticateAnswer> {
  const r = resolve(req);
  const body = {
    provider: req.provider,
    scopes: req.scopes,
    agent_id: r.agentId ?? null,
    user_id: r.userId ?? null,
    token_id: req.tokenId ?? null,
  };
  return call<AuthenticateAnswer>(`${r.platformUrl}/v2/auth/authenticate`, {
    method: "POST",
    headers: r.headers,
    body: JSON.stringify(body),
  });
}

/** Long-polls a started flow; the token when it completed within `seconds`, else null. */
export async function waitForConnection(
  req: AccessTokenRequest,
  authId: string,
  seconds: number,
): Promise<string | null> {
  const r = resolve(req);
  const answer = await call<{ status: string; token: string | null }>(
    `${r.platformUrl}/v2/auth/wait/${encodeURIComponent(authId)}?timeout=${seconds}`,
    { headers: r.headers },
  );
  return answer.status === "completed" ? answer.token : null;
}

/**
 * A fresh access token for the agent's connection to `provider`, or a LangGraph interrupt with the
 * OAuth URL. Must run inside a graph node (with a checkpointer) when a connection may be missing.
 */
export async function getAccessToken(req: AccessTokenRequest): Promise<string> {
  // Each round is one interrupt; a resume before the person finished pauses the run again.
  for (let round = 0; round < 10; round++) {
    const answer = await authenticateConnection(req);
    if (answer.status === "completed" && answer.token) return answer.token;
    if (!answer.url || !answer.auth_id)
      throw new ConnectionError(`authenticate answered ${answer.status} without a URL`);
    const payload: ConnectionInterrupt = {
      type: "wharf.connection_required",
      provider: req.provider,
      status: answer.status as ConnectionInterrupt["status"],
      url: answer.url,
      auth_id: answer.auth_id,
      message: `Connect your ${req.provider} account: open ${answer.url}, then resume the run.`,
    };
    interrupt(payload);
    // Resumed: the same request returns the same pending flow, so this is the link the person saw.
    const token = await waitForConnection(req, answer.auth_id, req.waitSeconds ?? 20);
    if (token) return token;
  }
  throw new ConnectionError(`the ${req.provider} connection was not completed`);
}
