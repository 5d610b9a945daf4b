/**
 * What the platform process does with an error nothing caught. Node's documentation warns that
 * after an uncaught exception the process's state is undefined: code stopped halfway through
 * whatever it was doing. That is safe to ignore only where what stopped is one connection's or one
 * stream's handler: the error names a dead peer or a closed stream, and what was left halfway is
 * that connection, which its own close cleans up. Anything else ends the process, and the
 * supervisor of `wharf up` starts a fresh one (sandboxes are re-adopted, deployments served again).
 */

export type FaultVerdict = "contain" | "restart";

/** Error codes of a connection or stream that went away or ended under its writer. */
const CONNECTION_OR_STREAM = new Set([
  // A web stream's controller used after its stream closed (a client that hung up).
  "ERR_INVALID_STATE",
  "ERR_STREAM_WRITE_AFTER_END",
  "ERR_STREAM_DESTROYED",
  "ERR_STREAM_PREMATURE_CLOSE",
  "ERR_STREAM_PUSH_AFTER_EOF",
  "ERR_STREAM_UNSHIFT_AFTER_END_EVENT",
  "ERR_STREAM_ALREADY_FINISHED",
  "ERR_STREAM_CANNOT_PIPE",
  "ERR_HTTP_HEADERS_SENT",
  "ERR_HTTP_INVALID_STATE",
  "ERR_HTTP_SOCKET_ASSIGNED",
  "ERR_HTTP2_INVALID_STREAM",
  "ERR_HTTP2_STREAM_CANCEL",
  "ERR_HTTP2_STREAM_ERROR",
  "ERR_HTTP2_SOCKET_UNBOUND",
  "ERR_HTTP2_GOAWAY_SESSION",
  "ERR_SOCKET_CLOSED",
  "ERR_SOCKET_CLOSED_BEFORE_CONNECTION",
  "ABORT_ERR",
  // A peer that reset, timed out or was never there.
  "ECONNRESET",
  "ECONNABORTED",
  "ECONNREFUSED",
  "EPIPE",
  "ETIMEDOUT",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "EPROTO",
  // Out of descriptors: a flood's doing, and over when it is.
  "EMFILE",
  "ENFILE",
]);

function codeOf(err: unknown): string | undefined {
  if (!err || typeof err !== "object") return undefined;
  const code = (err as { code?: unknown }).code;
  return typeof code === "string" ? code : undefined;
}

/** An uncaught exception: contained when it belongs to one connection or stream, else a restart. */
export function uncaughtExceptionVerdict(err: unknown): FaultVerdict {
  const code = codeOf(err);
  return code && CONNECTION_OR_STREAM.has(code) ? "contain" : "restart";
}

/**
 * An unhandled promise rejection is contained: unlike a throw from an event handler it interrupted
 * no synchronous code (what awaited it already stopped at an `await`), so the process's state is
 * what the code left at its last `await`, not half an update. Restarting would instead let any
 * request that reaches a forgotten `catch` stop every tenant's work.
 */
export function unhandledRejectionVerdict(): FaultVerdict {
  return "contain";
}

/** `wharf up`'s exit code when a fault ends it: the supervisor restarts the platform. */
export const FAULT_EXIT_CODE = 70;
