// oidc-provider ships no type declarations; the tests use only this much of it.
declare module "oidc-provider" {
  import type { RequestListener } from "node:http";

  interface ClientLike {
    grantTypeAllowed(type: string): boolean;
  }

  export default class Provider {
    constructor(
      issuer: string,
      configuration: Record<string, unknown> & {
        findAccount?: (
          ctx: unknown,
          id: string,
        ) => Promise<{ accountId: string; claims: () => Promise<Record<string, unknown>> }>;
        issueRefreshToken?: (ctx: unknown, client: ClientLike) => Promise<boolean>;
      },
    );
    callback(): RequestListener;
  }
}
