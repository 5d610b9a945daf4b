/**
 * What a failed request to an agent server means for sending it again. Only failures where the
 * server cannot have seen the request are resendable: a POST that starts a run must never run twice.
 *
 * - "not-listening": nothing accepted the connection (a TCP port refused, a unix socket file gone
 *   or refused): the server is starting, stopping or replaced; ask the route again and resend.
 * - "stale-socket": a kept-alive connection the server had already closed while it sat idle in the
 *   pool, which the platform had not noticed yet (a busy event loop reads the close late). The
 *   server closes only a connection with no request on it, so it never read this one. Over TCP
 *   this reads as ECONNRESET; over a unix socket (how confined revisions serve) the write itself
 *   fails with EPIPE.
 * - "other": the server may have seen the request (a reset on a fresh connection, a timeout).
 */
export type UpstreamFailure = "not-listening" | "stale-socket" | "other";

export function upstreamFailure(err: { code?: string; reusedSocket?: boolean }): UpstreamFailure {
  if (err.code === "ECONNREFUSED" || err.code === "ENOENT") return "not-listening";
  if (err.reusedSocket === true && (err.code === "ECONNRESET" || err.code === "EPIPE")) return "stale-socket";
  return "other";
}
