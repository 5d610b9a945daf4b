/**
 * Which destinations are AWS endpoints, so that only they ever receive a request signed with the
 * real keys. Service and region are NOT derived from the host (the client's own signature says
 * them, after its endpoint rules ran); this list only decides whether signing may happen at all.
 * Strict subdomains only: the apex of each suffix is not an endpoint.
 */
export const AWS_HOST_SUFFIXES = [
  "amazonaws.com", // commercial and GovCloud, incl. FIPS and legacy dual-stack forms
  "amazonaws.com.cn", // China
  "api.aws", // dual-stack
  "on.aws", // Lambda function URLs, other newer endpoints
  "api.amazonwebservices.com.cn", // China dual-stack
  "c2s.ic.gov", // ISO partitions
  "sc2s.sgov.gov",
  "cloud.adc-e.uk",
  "csp.hci.ic.gov",
];

/** `host` is the proxy's canonical destination host (lower case, no trailing dot, no port). */
export function isAwsHost(host: string, extraSuffixes: readonly string[] = []): boolean {
  const h = host.toLowerCase();
  for (const suffix of [...AWS_HOST_SUFFIXES, ...extraSuffixes]) {
    const s = suffix.toLowerCase().replace(/^\*?\./, "");
    if (h.length > s.length + 1 && h.endsWith(`.${s}`)) return true;
  }
  return false;
}
