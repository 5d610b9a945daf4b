/** A throwaway CA and leaf certificates for loopback HTTPS peers in the cloud-engine tests. */
import "reflect-metadata";
import crypto from "node:crypto";
import * as x509 from "@peculiar/x509";

x509.cryptoProvider.set(crypto.webcrypto as unknown as Crypto);
const ALG = { name: "ECDSA", namedCurve: "P-256", hash: "SHA-256" };

export interface TestCa {
  caPem: string;
  issue(names: string[]): Promise<{ cert: string; key: string }>;
}

function pem(label: string, der: ArrayBuffer): string {
  const b64 = Buffer.from(der).toString("base64").replace(/.{64}/g, "$&\n");
  return `-----BEGIN ${label}-----\n${b64}\n-----END ${label}-----\n`;
}

export async function createTestCa(): Promise<TestCa> {
  const subtle = crypto.webcrypto.subtle;
  const caKeys = (await subtle.generateKey(ALG, true, ["sign", "verify"])) as CryptoKeyPair;
  const notBefore = new Date(Date.now() - 86400_000);
  const notAfter = new Date(Date.now() + 7 * 86400_000);
  const ca = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: "01",
    name: "CN=Wharf cloud-engine test CA",
    notBefore,
    notAfter,
    keys: caKeys,
    signingAlgorithm: ALG,
    extensions: [
      new x509.BasicConstraintsExtension(true, 0, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign, true),
      await x509.SubjectKeyIdentifierExtension.create(caKeys.publicKey),
    ],
  });
  let serial = 2;
  return {
    caPem: ca.toString("pem"),
    async issue(names) {
      const keys = (await subtle.generateKey(ALG, true, ["sign", "verify"])) as CryptoKeyPair;
      const leaf = await x509.X509CertificateGenerator.create({
        serialNumber: (serial++).toString(16).padStart(2, "0"),
        subject: `CN=${names[0]}`,
        issuer: ca.subject,
        notBefore,
        notAfter,
        signingKey: caKeys.privateKey,
        publicKey: keys.publicKey,
        signingAlgorithm: ALG,
        extensions: [
          new x509.BasicConstraintsExtension(false),
          new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature, true),
          new x509.ExtendedKeyUsageExtension([x509.ExtendedKeyUsage.serverAuth]),
          new x509.SubjectAlternativeNameExtension(
            names.map((n) => ({ type: /^[\d.]+$/.test(n) ? ("ip" as const) : ("dns" as const), value: n })),
          ),
          await x509.AuthorityKeyIdentifierExtension.create(ca),
        ],
      });
      return { cert: leaf.toString("pem"), key: pem("PRIVATE KEY", await subtle.exportKey("pkcs8", keys.privateKey)) };
    },
  };
}
