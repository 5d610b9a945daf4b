import http from "node:http";
import type { AddressInfo } from "node:net";
import type { TestContext } from "node:test";
import Provider from "oidc-provider";

export interface StrictAuthServer {
  issuer: string;
  provider: Provider;
  clients: { basic: { id: string; secret: string }; public: { id: string } };
}

/**
 * oidc-provider on loopback, spec-strict: PKCE required for every client, exact redirect URIs,
 * registered client authentication methods enforced, refresh tokens rotated, RFC 7009 revocation.
 * Its development login and consent pages are driven by the test Browser.
 */
export async function startStrictAuthServer(t: TestContext, redirectUri: string): Promise<StrictAuthServer> {
  let handler: http.RequestListener = (_req, res) => res.writeHead(503).end();
  const server = http.createServer((req, res) => handler(req, res));
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const issuer = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const clients = {
    basic: { id: "wharf-basic", secret: "basic-client-secret-3e9a1c7d" },
    public: { id: "wharf-public" },
  };
  const provider = new Provider(issuer, {
    clients: [
      {
        client_id: clients.basic.id,
        client_secret: clients.basic.secret,
        redirect_uris: [redirectUri],
        token_endpoint_auth_method: "client_secret_basic",
        grant_types: ["authorization_code", "refresh_token"],
        response_types: ["code"],
      },
      {
        client_id: clients.public.id,
        redirect_uris: [redirectUri],
        token_endpoint_auth_method: "none",
        grant_types: ["authorization_code", "refresh_token"],
        response_types: ["code"],
      },
    ],
    pkce: { required: () => true },
    features: { revocation: { enabled: true }, introspection: { enabled: true }, devInteractions: { enabled: true } },
    findAccount: async (_ctx, id) => ({
      accountId: id,
      claims: async () => ({ sub: id, email: `${id}@example.test` }),
    }),
    claims: { openid: ["sub"], email: ["email"] },
    conformIdTokenClaims: false,
    issueRefreshToken: async (_ctx, client) => client.grantTypeAllowed("refresh_token"),
    rotateRefreshToken: () => true,
    cookies: { keys: ["wharf-test-cookie-key"] },
  });
  // oidc-provider prints development warnings through console; they are expected here.
  handler = provider.callback();
  t.after(() => new Promise<void>((resolve) => server.close(() => resolve())));
  return { issuer, provider, clients };
}
