/**
 * The keep-alive pairing between the platform's deployment proxy (the client) and a revision's
 * agent server (the server). Whoever closes an idle connection must be the client: a server that
 * closes one while the client sends its next request on it fails that request, and the client can
 * only resend it safely when it can tell the server never read it. So the proxy drops a connection
 * idle for UPSTREAM_IDLE_MS and the agent server keeps one for AGENT_SERVER_KEEP_ALIVE_MS, a margin
 * no event-loop delay on a loaded machine comes near (the platform's own server does the same for
 * its clients: WHARF_KEEP_ALIVE_TIMEOUT_MS).
 */
export const UPSTREAM_IDLE_MS = 4_000;
export const AGENT_SERVER_KEEP_ALIVE_MS = 65_000;
