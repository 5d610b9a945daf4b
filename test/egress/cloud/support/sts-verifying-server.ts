/**
 * An STS stand-in (GetCallerIdentity, query or JSON protocol) that verifies SigV4 the way AWS does
 * for non-S3 services, with its own code: canonical URI = the wire path normalised and encoded a
 * second time, payload hash = x-amz-content-sha256 when sent, else SHA-256 of the body it received.
 */
import crypto from "node:crypto";
import http from "node:http";
import type { AddressInfo } from "node:net";

const sha = (d: string | Buffer) => crypto.createHash("sha256").update(d).digest("hex");
const hmac = (k: Buffer | string, d: string) => crypto.createHmac("sha256", k).update(d).digest();
const enc = (s: string) =>
  encodeURIComponent(s).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);

function canonicalUri(wirePath: string): string {
  const out: string[] = [];
  for (const seg of wirePath.split("/")) {
    if (seg === "" || seg === ".") continue;
    if (seg === "..") out.pop();
    else out.push(seg);
  }
  const joined = `/${out.map(enc).join("/")}${out.length && wirePath.endsWith("/") ? "/" : ""}`;
  return joined;
}

export async function startVerifyingSts(creds: { accessKeyId: string; secretAccessKey: string }) {
  const log: Array<{ status: number; sentContentSha: boolean; error?: string }> = [];
  const server = http.createServer((req, res) => {
    const parts: Buffer[] = [];
    req.on("data", (d) => parts.push(d));
    req.on("end", () => {
      const body = Buffer.concat(parts);
      const entry: { status: number; sentContentSha: boolean; error?: string } = {
        status: 200,
        sentContentSha: req.headers["x-amz-content-sha256"] !== undefined,
      };
      log.push(entry);
      const fail = (status: number, code: string) => {
        entry.status = status;
        entry.error = code;
        res
          .writeHead(status, { "content-type": "text/xml" })
          .end(
            `<ErrorResponse><Error><Type>Sender</Type><Code>${code}</Code><Message>${code}</Message></Error></ErrorResponse>`,
          );
      };
      const m = /^AWS4-HMAC-SHA256 Credential=([^,\s]+),\s*SignedHeaders=([^,\s]+),\s*Signature=([0-9a-f]{64})$/.exec(
        req.headers.authorization ?? "",
      );
      if (!m) return fail(403, "MissingAuthenticationToken");
      const [akid, date, region, service] = m[1].split("/");
      if (akid !== creds.accessKeyId) return fail(403, "InvalidClientTokenId");
      const raw: Array<[string, string]> = [];
      for (let i = 0; i < req.rawHeaders.length; i += 2)
        raw.push([req.rawHeaders[i].toLowerCase(), req.rawHeaders[i + 1]]);
      const signed = m[2].split(";");
      const headerLines = signed
        .map(
          (n) =>
            `${n}:${raw
              .filter(([k]) => k === n)
              .map(([, v]) => v.trim().replace(/\s+/g, " "))
              .join(",")}\n`,
        )
        .join("");
      const [wirePath, rawQuery = ""] = (req.url ?? "/").split("?");
      const query = rawQuery
        .split("&")
        .filter(Boolean)
        .map((p) => p.split("="))
        .map(([k, v = ""]) => [enc(decodeURIComponent(k)), enc(decodeURIComponent(v))])
        .sort((a, b) => (a[0] + "=" + a[1] < b[0] + "=" + b[1] ? -1 : 1))
        .map(([k, v]) => `${k}=${v}`)
        .join("&");
      const payload = String(req.headers["x-amz-content-sha256"] ?? sha(body));
      if (req.headers["x-amz-content-sha256"] !== undefined && payload !== sha(body))
        return fail(400, "XAmzContentSHA256Mismatch");
      const canonical = [req.method, canonicalUri(wirePath), query, headerLines, signed.join(";"), payload].join("\n");
      const scope = `${date}/${region}/${service}/aws4_request`;
      const key = hmac(hmac(hmac(hmac(`AWS4${creds.secretAccessKey}`, date), region), service), "aws4_request");
      const expected = hmac(
        key,
        ["AWS4-HMAC-SHA256", String(req.headers["x-amz-date"]), scope, sha(canonical)].join("\n"),
      ).toString("hex");
      if (expected !== m[3]) return fail(403, "SignatureDoesNotMatch");
      const identity = {
        Account: "123456789012",
        Arn: "arn:aws:iam::123456789012:user/wharf-agent",
        UserId: "AIDAWHARFTESTUSER",
      };
      if (String(req.headers["content-type"]).includes("json"))
        return res.writeHead(200, { "content-type": "application/x-amz-json-1.0" }).end(JSON.stringify(identity));
      res
        .writeHead(200, { "content-type": "text/xml" })
        .end(
          `<GetCallerIdentityResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/"><GetCallerIdentityResult><Arn>${identity.Arn}</Arn><UserId>${identity.UserId}</UserId><Account>${identity.Account}</Account></GetCallerIdentityResult><ResponseMetadata><RequestId>00000000-0000-0000-0000-000000000000</RequestId></ResponseMetadata></GetCallerIdentityResponse>`,
        );
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return {
    port: (server.address() as AddressInfo).port,
    log,
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}
