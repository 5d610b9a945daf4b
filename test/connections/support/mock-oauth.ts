import http from "node:http";
import type { AddressInfo } from "node:net";
import type { TestContext } from "node:test";
import { OAuth2Issuer, OAuth2Service, type MutableResponse } from "oauth2-mock-server";

export interface TokenRequestRecord {
  grant_type: string;
  code?: string;
  code_verifier?: string;
  refresh_token?: string;
  client_id?: string;
  client_secret?: string;
  authorization?: string;
}

export interface MockAuthServer {
  url: string;
  service: OAuth2Service;
  tokenRequests: TokenRequestRecord[];
  refreshRequests(): TokenRequestRecord[];
  revocations: Array<{ token: string; token_type_hint: string | null }>;
  /** Holds every token endpoint answer this long (widens the window for refresh races). */
  tokenDelayMs: number;
  /** The account the userinfo endpoint describes (the "person" logging in at the provider). */
  account: Record<string, unknown>;
  /** Every access and refresh token the server issued, newest last. */
  issued: Array<{ access_token: string; refresh_token?: string }>;
  /** Options for the provider body pointing at this server. */
  providerBody(providerId: string, extra?: Record<string, unknown>): Record<string, unknown>;
}

/**
 * A real oauth2-mock-server on loopback behind a thin wrapper that records the token and revocation
 * requests it receives, can delay the token endpoint, and grants exactly the scopes asked for at
 * /authorize (the mock's own answer is the placeholder scope "dummy").
 */
export async function startMockAuthServer(t: TestContext): Promise<MockAuthServer> {
  const issuer = new OAuth2Issuer();
  await issuer.keys.generate("RS256");
  const service = new OAuth2Service(issuer);
  const scopeByCode = new Map<string, string | undefined>();
  const state: Omit<MockAuthServer, "url" | "service" | "refreshRequests" | "providerBody"> = {
    tokenRequests: [],
    revocations: [],
    tokenDelayMs: 0,
    account: { sub: "johndoe", email: "john@example.test" },
    issued: [],
  };
  service.on("beforeAuthorizeRedirect", (redirect: { url: URL }, req: http.IncomingMessage) => {
    const code = redirect.url.searchParams.get("code");
    const q = new URL(req.url ?? "/", "http://x").searchParams;
    if (code) scopeByCode.set(code, q.get("scope") ?? undefined);
  });
  service.on("beforeResponse", (res: MutableResponse, req: http.IncomingMessage & { body: Record<string, string> }) => {
    const body = res.body as Record<string, unknown>;
    if (res.statusCode === 200 && typeof body.access_token === "string") {
      if (req.body.grant_type === "authorization_code") {
        const scope = scopeByCode.get(req.body.code);
        if (scope === undefined) delete body.scope;
        else body.scope = scope;
      } else delete body.scope; // a refresh keeps the granted scopes
    }
  });
  // Registered after the wrapper's own listener, so a test's `once` hooks see the adjusted body.
  service.on("beforeResponse", (res: MutableResponse) => {
    const body = res.body as Record<string, string>;
    if (res.statusCode === 200 && body.access_token)
      state.issued.push({ access_token: body.access_token, refresh_token: body.refresh_token });
  });
  service.on(
    "beforeResponse",
    (_res: MutableResponse, req: http.IncomingMessage & { body: Record<string, string> }) => {
      const record: TokenRequestRecord = { grant_type: req.body.grant_type ?? "" };
      for (const k of ["code", "code_verifier", "refresh_token", "client_id", "client_secret"] as const)
        if (req.body[k]) record[k] = req.body[k];
      if (req.headers.authorization) record.authorization = req.headers.authorization;
      state.tokenRequests.push(record);
    },
  );
  const handler = service.requestHandler;
  const server = http.createServer((req, res) => {
    const path = (req.url ?? "").split("?")[0];
    if (req.method === "POST" && path === "/revoke") {
      // The mock does not parse revocation bodies: read and record them here, and answer 200 (RFC 7009).
      const chunks: Buffer[] = [];
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", () => {
        const form = new URLSearchParams(Buffer.concat(chunks).toString("utf8"));
        state.revocations.push({ token: form.get("token") ?? "", token_type_hint: form.get("token_type_hint") });
        res.writeHead(200).end();
      });
      return;
    }
    if (req.method === "POST" && path === "/token" && state.tokenDelayMs > 0) {
      setTimeout(() => handler(req, res), state.tokenDelayMs);
      return;
    }
    handler(req, res);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  issuer.url = url;
  t.after(() => new Promise<void>((resolve) => server.close(() => resolve())).then(() => undefined));
  service.on("beforeUserinfo", (res: MutableResponse) => {
    res.body = { ...state.account };
  });
  const mock: MockAuthServer = Object.assign(state, {
    url,
    service,
    refreshRequests: () => state.tokenRequests.filter((r) => r.grant_type === "refresh_token"),
    providerBody: (providerId: string, extra: Record<string, unknown> = {}) => ({
      provider_id: providerId,
      name: `Mock ${providerId}`,
      client_id: "mock-client",
      client_secret: "mock-client-secret",
      auth_url: `${url}/authorize`,
      token_url: `${url}/token`,
      revocation_url: `${url}/revoke`,
      userinfo_url: `${url}/userinfo`,
      ...extra,
    }),
  });
  return mock;
}
