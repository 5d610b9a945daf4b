import { z } from "zod";
import { decl, int, flag, text, list } from "./declare.ts";

/** The settings of the egress proxy. */
export const EGRESS_SETTINGS = {
  WHARF_EGRESS_HOSTS: decl({
    part: "egress",
    type: "list",
    default: "",
    description: "static resolution for the egress proxy: comma-separated `name=address` or `name:port=address:port`",
    schema: z.string(),
  }),
  WHARF_EGRESS_ALLOW_INTERNAL: decl({
    part: "egress",
    type: "CIDR list",
    default: "",
    description: "comma-separated CIDRs of internal addresses sandboxes may reach (never through proxy_config)",
    schema: list(),
  }),
  WHARF_EGRESS_UPSTREAM_CA_FILE: decl({
    part: "egress",
    type: "path",
    defaultText: "none",
    description:
      "PEM file of extra roots trusted for upstream TLS, on top of Node's bundled roots and the host's CA store",
    schema: text().optional(),
  }),
  WHARF_EGRESS_SYSTEM_CA_FILE: decl({
    part: "egress",
    type: "path",
    default: "auto",
    description:
      "the host's CA bundle trusted for upstream TLS: `auto` (`SSL_CERT_FILE` if set, else the first of `/etc/ssl/certs/ca-certificates.crt`, `/etc/pki/tls/certs/ca-bundle.crt`, `/etc/ssl/ca-bundle.pem`, `/etc/ssl/cert.pem`), a path, or `none`",
    schema: text(),
  }),
  WHARF_EGRESS_SYSTEM_DNS: decl({
    part: "egress",
    type: "0/1",
    default: "1",
    description: "1 resolves names with the system resolver; 0 resolves only `WHARF_EGRESS_HOSTS`",
    schema: flag(),
  }),
  WHARF_EGRESS_HEADER_TIMEOUT_MS: decl({
    part: "egress",
    type: "ms",
    default: "10000",
    description: "time a sandbox connection has to send its request head or TLS ClientHello",
    schema: int(100),
  }),
  WHARF_EGRESS_IDLE_TIMEOUT_MS: decl({
    part: "egress",
    type: "ms",
    default: "120000",
    description: "idle sandbox connections are closed after this",
    schema: int(100),
  }),
  WHARF_EGRESS_MAX_CONNECTIONS: decl({
    part: "egress",
    type: "integer",
    default: "512",
    description: "concurrent client connections per sandbox",
    schema: int(1),
  }),
  WHARF_EGRESS_ISOLATE: decl({
    part: "egress",
    type: "0/1",
    default: "1",
    description: "1 runs the egress data plane in its own supervised process; 0 in the platform process",
    schema: flag(),
  }),
  WHARF_EGRESS_FAULT_HOOK: decl({
    part: "egress",
    type: "0/1",
    default: "0",
    description: "1 lets a request with `x-wharf-egress-fault: crash` crash the data plane (fault tests only)",
    schema: flag(),
  }),
  WHARF_EGRESS_PROXY_PORT: decl({
    part: "egress",
    type: "port",
    default: "3128",
    description: "port of the explicit proxy on 127.0.0.1 inside each sandbox",
    schema: int(1, 65535),
  }),
} as const;
