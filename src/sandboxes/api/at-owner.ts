import type http from "node:http";
import type { Context } from "hono";
import type { PlatformContext } from "../../platform/context.ts";
import type { SandboxRow } from "../store/sandbox-store.ts";

/**
 * Replica mode: a control-plane call that acts on a sandbox's processes or files (stop, start,
 * delete, snapshot capture, PATCH) is answered by the replica that runs it, once the caller's
 * workspace has resolved the name to a row. Null (act here) in one process, when this replica owns
 * it, when its owner's lease ran out, or when the call was already forwarded here.
 */
export async function answerAtOwner(ctx: PlatformContext, c: Context, row: SandboxRow): Promise<Response | null> {
  const cluster = ctx.cluster;
  if (!cluster || !row.owner_replica || row.owner_replica === cluster.replicaId) return null;
  const incoming = (c.env as { incoming?: http.IncomingMessage } | undefined)?.incoming;
  const url = new URL(c.req.url);
  const method = c.req.method;
  // The router read the body through the request's cache, so its text is still there.
  const body = method === "GET" || method === "HEAD" ? null : await c.req.text();
  return cluster.forwardCall(
    row.owner_replica,
    {
      method,
      target: url.pathname + url.search,
      headers: c.req.raw.headers,
      body,
      from: incoming?.socket.remoteAddress,
    },
    incoming,
  );
}
