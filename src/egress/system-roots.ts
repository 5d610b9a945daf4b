import fs from "node:fs";

/**
 * The host's CA store, as the host's own tools (curl, git, npm, pip on OpenSSL) trust it. Node 20
 * has no `tls.getCACertificates("system")`, so the bundle file is read once when the proxy starts.
 * Companies install their registry mirror's or TLS-inspecting proxy's root there; trusting only
 * Node's built-in list made builds behind them fail with 502s after minutes of retries.
 */

/** Where distributions keep the PEM bundle of the host's roots, in the order OpenSSL builds look. */
export const SYSTEM_BUNDLE_CANDIDATES = [
  "/etc/ssl/certs/ca-certificates.crt", // Debian, Ubuntu, Alpine, Arch
  "/etc/pki/tls/certs/ca-bundle.crt", // Fedora, RHEL, CentOS
  "/etc/ssl/ca-bundle.pem", // openSUSE
  "/etc/ssl/cert.pem", // Alpine's link, macOS, BSDs
] as const;

export type SystemBundleChoice = { kind: "off" } | { kind: "file"; path: string; required: boolean };

/**
 * Which bundle to read: `none` trusts no host roots; an explicit path must be readable; `auto` (the
 * default) takes OpenSSL's `SSL_CERT_FILE` when the platform has one, else the first bundle that exists.
 */
export function chooseSystemBundle(
  setting: string | undefined,
  sslCertFile: string | undefined,
  exists: (p: string) => boolean,
): SystemBundleChoice {
  const value = (setting ?? "").trim();
  if (value === "none") return { kind: "off" };
  if (value && value !== "auto") return { kind: "file", path: value, required: true };
  if (sslCertFile) return { kind: "file", path: sslCertFile, required: false };
  const found = SYSTEM_BUNDLE_CANDIDATES.find(exists);
  return found ? { kind: "file", path: found, required: false } : { kind: "off" };
}

/** The certificates of a PEM bundle, one PEM block each (comments and trust annotations dropped). */
export function pemCertificates(text: string): string[] {
  return text.match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g) ?? [];
}

export class SystemRootsError extends Error {}

/** Reads the chosen bundle; a missing default is no roots, a missing explicit path an error. */
export function readSystemRoots(
  choice: SystemBundleChoice,
  read: (p: string) => string = (p) => fs.readFileSync(p, "utf8"),
): { path: string | null; pems: string[] } {
  if (choice.kind === "off") return { path: null, pems: [] };
  try {
    return { path: choice.path, pems: pemCertificates(read(choice.path)) };
  } catch (err) {
    if (!choice.required) return { path: null, pems: [] };
    throw new SystemRootsError(`WHARF_EGRESS_SYSTEM_CA_FILE: cannot read ${choice.path}: ${(err as Error).message}`, {
      cause: err,
    });
  }
}
