import "reflect-metadata";
import crypto from "node:crypto";
import tls from "node:tls";
import * as x509 from "@peculiar/x509";
import type { CanonicalHost } from "../policy/canonical-host.ts";

x509.cryptoProvider.set(crypto.webcrypto as unknown as Crypto);

const EC = { name: "ECDSA", namedCurve: "P-256" } as const;
const SIGN = { name: "ECDSA", hash: "SHA-256" } as const;
const DAY = 24 * 3600 * 1000;

/** Validity of the interception CA and of the leaves it signs. */
export const CA_LIFETIME_DAYS = 365;
export const CA_RENEW_BEFORE_DAYS = 30;
const LEAF_LIFETIME_DAYS = 30;
/** Leaves are re-minted this long before they expire, so no client ever sees an expired one. */
const LEAF_REFRESH_MS = DAY;

export interface CaMaterial {
  certPem: string;
  keyPem: string;
  notAfter: Date;
}

function pem(label: string, der: ArrayBuffer): string {
  const b64 = Buffer.from(der).toString("base64").replace(/.{64}/g, "$&\n");
  return `-----BEGIN ${label}-----\n${b64}${b64.endsWith("\n") ? "" : "\n"}-----END ${label}-----\n`;
}

const randomSerial = () => {
  const b = crypto.randomBytes(16);
  b[0] &= 0x7f; // positive INTEGER
  return b.toString("hex");
};

/**
 * A new ECDSA P-256 interception CA (pathlen 0, keyCertSign + cRLSign). Its key stays in the
 * platform process (sealed in the database); only the certificate goes into sandboxes.
 */
export async function createCa(commonName: string): Promise<CaMaterial> {
  const keys = (await crypto.webcrypto.subtle.generateKey(EC, true, ["sign", "verify"])) as CryptoKeyPair;
  const notBefore = new Date(Date.now() - DAY);
  const notAfter = new Date(Date.now() + CA_LIFETIME_DAYS * DAY);
  const cert = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: randomSerial(),
    name: [{ CN: [commonName] }, { O: ["Wharf egress proxy"] }],
    notBefore,
    notAfter,
    signingAlgorithm: SIGN,
    keys,
    extensions: [
      new x509.BasicConstraintsExtension(true, 0, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign, true),
      await x509.SubjectKeyIdentifierExtension.create(keys.publicKey),
    ],
  });
  const keyDer = await crypto.webcrypto.subtle.exportKey("pkcs8", keys.privateKey);
  return { certPem: cert.toString("pem") + "\n", keyPem: pem("PRIVATE KEY", keyDer), notAfter };
}

interface LeafEntry {
  context: tls.SecureContext;
  certPem: string;
  refreshAt: number;
}

/**
 * Mints leaf certificates for intercepted hosts under one CA: one ECDSA P-256 leaf key for all
 * hosts (a new host costs one signature, not a key generation), SAN DNS or IP, AKI and SKI,
 * EKU serverAuth. Secure contexts are cached in a bounded LRU keyed by canonical host (the names
 * come from sandboxed clients, so the cache must not grow without bound), and concurrent first
 * requests for one host share one mint.
 */
export class LeafMinter {
  private readonly cache = new Map<string, LeafEntry>();
  private readonly inFlight = new Map<string, Promise<LeafEntry>>();
  private leafKeys: Promise<{ keys: CryptoKeyPair; keyPem: string }> | null = null;
  private caCert: x509.X509Certificate;
  private caKey: Promise<CryptoKey>;
  minted = 0;

  constructor(
    readonly ca: CaMaterial,
    private readonly capacity = 1000,
  ) {
    this.caCert = new x509.X509Certificate(ca.certPem);
    const der = crypto.createPrivateKey(ca.keyPem).export({ format: "der", type: "pkcs8" });
    this.caKey = crypto.webcrypto.subtle.importKey("pkcs8", der, EC, false, ["sign"]) as Promise<CryptoKey>;
  }

  get size(): number {
    return this.cache.size;
  }

  /** The cached context, if fresh: the fast path, no promise. */
  peek(host: CanonicalHost): tls.SecureContext | null {
    const key = `${host.kind}:${host.host}`;
    const hit = this.cache.get(key);
    if (!hit || hit.refreshAt < Date.now()) return null;
    // Re-insert to keep LRU order (Map iteration order is insertion order).
    this.cache.delete(key);
    this.cache.set(key, hit);
    return hit.context;
  }

  async contextFor(host: CanonicalHost): Promise<tls.SecureContext> {
    const fast = this.peek(host);
    if (fast) return fast;
    return (await this.entryFor(host)).context;
  }

  async certificatePem(host: CanonicalHost): Promise<string> {
    return (await this.entryFor(host)).certPem;
  }

  private entryFor(host: CanonicalHost): Promise<LeafEntry> {
    const key = `${host.kind}:${host.host}`;
    const hit = this.cache.get(key);
    if (hit && hit.refreshAt >= Date.now()) return Promise.resolve(hit);
    let pending = this.inFlight.get(key);
    if (!pending) {
      pending = this.mint(host)
        .then((entry) => {
          this.cache.delete(key);
          this.cache.set(key, entry);
          while (this.cache.size > this.capacity) this.cache.delete(this.cache.keys().next().value!);
          return entry;
        })
        .finally(() => this.inFlight.delete(key));
      this.inFlight.set(key, pending);
    }
    return pending;
  }

  private keysOnce() {
    this.leafKeys ??= (async () => {
      const keys = (await crypto.webcrypto.subtle.generateKey(EC, true, ["sign", "verify"])) as CryptoKeyPair;
      return { keys, keyPem: pem("PRIVATE KEY", await crypto.webcrypto.subtle.exportKey("pkcs8", keys.privateKey)) };
    })();
    return this.leafKeys;
  }

  private async mint(host: CanonicalHost): Promise<LeafEntry> {
    const { keys, keyPem } = await this.keysOnce();
    const now = Date.now();
    const notAfter = new Date(Math.min(this.ca.notAfter.getTime(), now + LEAF_LIFETIME_DAYS * DAY));
    const san =
      host.kind === "name" ? { type: "dns" as const, value: host.host } : { type: "ip" as const, value: host.host };
    const cert = await x509.X509CertificateGenerator.create({
      serialNumber: randomSerial(),
      subject: [{ CN: [host.host] }],
      issuer: this.caCert.subject,
      notBefore: new Date(now - DAY),
      notAfter,
      signingAlgorithm: SIGN,
      publicKey: keys.publicKey,
      signingKey: await this.caKey,
      extensions: [
        new x509.BasicConstraintsExtension(false, undefined, true),
        new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature, true),
        new x509.ExtendedKeyUsageExtension([x509.ExtendedKeyUsage.serverAuth], false),
        new x509.SubjectAlternativeNameExtension([san], false),
        await x509.AuthorityKeyIdentifierExtension.create(this.caCert, false),
        await x509.SubjectKeyIdentifierExtension.create(keys.publicKey),
      ],
    });
    this.minted++;
    const certPem = cert.toString("pem") + "\n";
    const context = tls.createSecureContext({ key: keyPem, cert: certPem, minVersion: "TLSv1.2" });
    return {
      context,
      certPem,
      refreshAt: Math.min(notAfter.getTime() - LEAF_REFRESH_MS, now + LEAF_LIFETIME_DAYS * DAY),
    };
  }
}
