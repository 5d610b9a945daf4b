import type { ClientReply, SandboxHandle } from "./types.ts";
import { ClientResponse } from "./http1/client-response.ts";
import { H1Pool, type H1Request } from "./http1/h1-upstream.ts";
import { H2Origin } from "./h2-upstream.ts";
import type { RequestContext } from "./request-context.ts";
import { reply } from "./replies.ts";

// A decided request's way upstream: the sandbox's pools, the dispatch, an upstream's failure.

/**
 * Sends one request upstream and streams the answer back with backpressure, through the sandbox's
 * own pool for the checked address: HTTP/1.1 clients through the HTTP/1.1 client (`h1-upstream.ts`:
 * keep-alive, no pipelining, bodies framed by the client: a streamed body is chunked, a
 * Content-Length is checked); HTTP/2 clients over TLS through an origin offered HTTP/2 as well
 * (`h2-upstream.ts`: gRPC needs it end to end; a server that only knows HTTP/1.1 still works).
 */
export function dispatchUpstream(rc: RequestContext, request: H1Request): void {
  // The client left while the request was being decided: nothing goes upstream.
  if (rc.res.gone) return;
  const sink = new ClientResponse(rc.res, upstreamFailed, rc);
  const pool = rc.h2 && rc.secure ? h2OriginFor(rc) : h1PoolFor(rc);
  sink.exchange = pool.request(request, sink);
}

/** An upstream that could not be reached or answered badly: audited, 502 (or a cut answer). */
function upstreamFailed(res: ClientReply, err: Error & { code?: string }, rc: RequestContext): void {
  const code = err.code ?? err.name ?? "error";
  const verify = /CERT|SELF_SIGNED|UNABLE_TO|ERR_TLS/.test(code) || /certificate/i.test(err.message);
  const reason = verify ? `upstream certificate rejected (${code})` : `upstream connection failed (${code})`;
  rc.decide("block", "failed", undefined, reason);
  if (!res.headersSent)
    reply(
      rc.proxy,
      res,
      502,
      verify
        ? `egress: upstream certificate verification failed (${code})`
        : `egress: upstream connection failed (${code})`,
    );
  else res.destroy();
}

/** The sandbox's HTTP/1.1 pool for the request's checked address (and TLS name). */
function h1PoolFor(rc: RequestContext): H1Pool {
  const { sandbox: sb, secure, host } = rc;
  const target = rc.target!;
  const servername = secure && host.kind === "name" ? host.host : "";
  const key = `${secure ? "s" : "p"}1|${target.address}|${target.port}|${servername}`;
  let pool = sb.pools.get(key) as H1Pool | undefined;
  if (!pool) {
    pool = new H1Pool({
      address: target.address,
      port: target.port,
      tls: secure
        ? { secureContext: rc.proxy.upstreamContextFor(sb.policy), servername: servername || undefined }
        : null,
    });
    addPool(sb, key, pool);
  }
  return pool;
}

function addPool(sb: SandboxHandle, key: string, pool: H1Pool | H2Origin): void {
  if (sb.pools.size > 256) {
    const [oldKey, old] = sb.pools.entries().next().value!;
    sb.pools.delete(oldKey);
    void old.close();
  }
  sb.pools.set(key, pool);
}

/** The sandbox's HTTP/2-first origin for the request's checked address and TLS name. */
function h2OriginFor(rc: RequestContext): H2Origin {
  const { sandbox: sb, host } = rc;
  const target = rc.target!;
  const servername = host.kind === "name" ? host.host : "";
  const key = `s2|${target.address}|${target.port}|${servername}`;
  let origin = sb.pools.get(key) as H2Origin | undefined;
  if (!origin) {
    origin = new H2Origin({
      address: target.address,
      port: target.port,
      tls: { secureContext: rc.proxy.upstreamContextFor(sb.policy), servername: servername || undefined },
    });
    addPool(sb, key, origin);
  }
  return origin;
}
