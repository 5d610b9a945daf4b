import type { Authenticate } from "../../http/authenticate.ts";
import { HttpError } from "../../http/errors.ts";
import type { Principal } from "../../http/principal.ts";

/** The headers a caller may put a platform credential in (the session cookie is handled apart). */
export const CREDENTIAL_HEADERS = ["x-api-key", "authorization"] as const;
export type CredentialHeader = (typeof CREDENTIAL_HEADERS)[number];

/**
 * Platform headers of no use to deployed code: the console's CSRF token (a hash of its session),
 * and the principal header, which only the proxy itself sets.
 */
export const PLATFORM_ONLY_HEADERS = new Set(["x-wharf-csrf"]);

/** Which credential header the authenticator read for a principal of this scheme. */
export function headerOfScheme(scheme: Principal["scheme"]): CredentialHeader | null {
  if (scheme === "api_key") return "x-api-key";
  if (scheme === "bearer") return "authorization";
  return null;
}

/**
 * The credential headers of a request that carry a platform credential (of any workspace), to be
 * dropped before the request reaches deployed code: the agent server learns who calls from the
 * proxy's principal header, and the project's own credentials (a custom auth handler's
 * `Authorization`, a header of its own named `x-api-key`) are not the platform's and pass. The
 * header the admitted principal came from is known already; any other is checked on its own.
 */
export async function platformCredentialHeaders(
  headers: Headers,
  authenticate: Authenticate,
  admitted: Principal | null,
): Promise<CredentialHeader[]> {
  const known = admitted ? headerOfScheme(admitted.scheme) : null;
  const found: CredentialHeader[] = [];
  for (const name of CREDENTIAL_HEADERS) {
    const value = headers.get(name);
    if (!value) continue;
    if (name === known || (await isPlatformCredential(name, value, authenticate))) found.push(name);
  }
  return found;
}

async function isPlatformCredential(
  name: CredentialHeader,
  value: string,
  authenticate: Authenticate,
): Promise<boolean> {
  try {
    await authenticate(new Headers({ [name]: value }), "GET");
    return true;
  } catch (err) {
    // Refused: not a platform credential. Anything else (storage down) cannot tell: do not forward it.
    return !(err instanceof HttpError);
  }
}
