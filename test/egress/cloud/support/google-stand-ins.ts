/**
 * Local stand-ins for Google's token endpoint (checks the JWT-bearer assertion: RS256 signature
 * with the service account's public key, iss, aud == token_uri, scopes) and for a Google API host
 * (checks the bearer token is one the token endpoint minted), on loopback.
 */
import crypto from "node:crypto";
import http from "node:http";
import type { AddressInfo } from "node:net";

export interface TestServiceAccount {
  json: string;
  clientEmail: string;
  publicKey: crypto.KeyObject;
  privateKeyPem: string;
}

export function makeServiceAccount(tokenUri: string): TestServiceAccount {
  const { privateKey, publicKey } = crypto.generateKeyPairSync("rsa", { modulusLength: 2048 });
  const privateKeyPem = privateKey.export({ type: "pkcs8", format: "pem" }).toString();
  const clientEmail = "agent@wharf-test-project.iam.gserviceaccount.com";
  const json = JSON.stringify({
    type: "service_account",
    project_id: "wharf-test-project",
    private_key_id: "real-key-id-1",
    private_key: privateKeyPem,
    client_email: clientEmail,
    client_id: "1234",
    token_uri: tokenUri,
  });
  return { json, clientEmail, publicKey, privateKeyPem };
}

export interface TokenEndpoint {
  url: string;
  minted: string[];
  /** Scope claims of every accepted assertion. */
  scopes: string[];
  failNext: number;
  delayMs: number;
  expiresIn: number;
  setAccount(sa: TestServiceAccount): void;
  close(): Promise<void>;
}

function b64urlJson(part: string): Record<string, unknown> {
  return JSON.parse(Buffer.from(part, "base64url").toString()) as Record<string, unknown>;
}

export async function startTokenEndpoint(address = "127.0.0.1"): Promise<TokenEndpoint> {
  let account: TestServiceAccount | null = null;
  const state = {
    url: "",
    minted: [] as string[],
    scopes: [] as string[],
    failNext: 0,
    delayMs: 0,
    expiresIn: 3600,
    setAccount: (sa: TestServiceAccount) => void (account = sa),
    close: async () => {},
  };
  const server = http.createServer((req, res) => {
    let body = "";
    req.on("data", (d) => (body += d));
    req.on("end", () => {
      const reply = (status: number, v: unknown) =>
        res.writeHead(status, { "content-type": "application/json" }).end(JSON.stringify(v));
      const form = new URLSearchParams(body);
      const assertion = form.get("assertion") ?? "";
      const [h, p, s] = assertion.split(".");
      if (
        req.method !== "POST" ||
        req.url !== "/token" ||
        form.get("grant_type") !== "urn:ietf:params:oauth:grant-type:jwt-bearer" ||
        !h ||
        !p ||
        !s
      )
        return reply(400, { error: "invalid_request" });
      const ok =
        account &&
        crypto.verify("RSA-SHA256", Buffer.from(`${h}.${p}`), account.publicKey, Buffer.from(s, "base64url"));
      const claims = b64urlJson(p);
      if (!ok || claims.iss !== account!.clientEmail || claims.aud !== state.url || typeof claims.scope !== "string")
        return reply(400, { error: "invalid_grant", error_description: "bad assertion" });
      if (state.failNext > 0) {
        state.failNext--;
        return reply(400, { error: "invalid_grant", error_description: "account disabled" });
      }
      const token = `ya29.minted-${state.minted.length + 1}-${crypto.randomBytes(6).toString("hex")}`;
      setTimeout(() => {
        state.minted.push(token);
        state.scopes.push(claims.scope as string);
        reply(200, { access_token: token, expires_in: state.expiresIn, token_type: "Bearer" });
      }, state.delayMs);
    });
  });
  await new Promise<void>((r) => server.listen(0, address, r));
  state.url = `http://${address}:${(server.address() as AddressInfo).port}/token`;
  state.close = () =>
    new Promise<void>((r) => {
      server.closeAllConnections();
      server.close(() => r());
    });
  return state;
}

/** A tiny Cloud Storage JSON API: one bucket, multipart uploads, media downloads, listing. */
export async function startGoogleApi(
  isMinted: (token: string) => boolean,
  address = "127.0.0.1",
): Promise<{ port: number; seen: Array<{ host: string; path: string; auth: string }>; close(): Promise<void> }> {
  const objects = new Map<string, Buffer>();
  const seen: Array<{ host: string; path: string; auth: string }> = [];
  const server = http.createServer((req, res) => {
    const parts: Buffer[] = [];
    req.on("data", (d) => parts.push(d));
    req.on("end", () => {
      const auth = String(req.headers.authorization ?? "");
      seen.push({ host: String(req.headers.host), path: req.url ?? "", auth });
      const json = (status: number, v: unknown) =>
        res.writeHead(status, { "content-type": "application/json" }).end(JSON.stringify(v));
      if (!auth.startsWith("Bearer ") || !isMinted(auth.slice(7)))
        return json(401, { error: { code: 401, message: "Invalid Credentials" } });
      const url = new URL(req.url ?? "/", "http://x");
      const meta = (name: string) => ({
        kind: "storage#object",
        bucket: "wharf-b",
        name,
        size: String(objects.get(name)?.length ?? 0),
        id: `wharf-b/${name}`,
      });
      let m: RegExpExecArray | null;
      if (req.method === "POST" && url.pathname === "/upload/storage/v1/b/wharf-b/o") {
        const body = Buffer.concat(parts).toString("latin1");
        const boundary = /boundary="?([^";]+)"?/.exec(String(req.headers["content-type"]))?.[1] ?? "";
        const sections = body.split(`--${boundary}`).filter((x) => x.includes("\r\n\r\n"));
        const metadata = JSON.parse(sections[0].split("\r\n\r\n")[1]) as { name?: string };
        const name = url.searchParams.get("name") ?? metadata.name ?? "unnamed";
        const data = sections[1].slice(sections[1].indexOf("\r\n\r\n") + 4).replace(/\r\n$/, "");
        objects.set(name, Buffer.from(data, "latin1"));
        return json(200, meta(name));
      }
      if (req.method === "GET" && url.pathname === "/storage/v1/b/wharf-b")
        return json(200, { kind: "storage#bucket", name: "wharf-b", id: "wharf-b" });
      if (req.method === "GET" && url.pathname === "/storage/v1/b/wharf-b/o")
        return json(200, { kind: "storage#objects", items: [...objects.keys()].map(meta) });
      if (req.method === "GET" && (m = /^\/(?:download\/)?storage\/v1\/b\/wharf-b\/o\/(.+)$/.exec(url.pathname))) {
        const name = decodeURIComponent(m[1]);
        const obj = objects.get(name);
        if (!obj) return json(404, { error: { code: 404, message: "No such object" } });
        if (url.searchParams.get("alt") === "media")
          return res
            .writeHead(200, { "content-type": "application/octet-stream", "content-length": obj.length })
            .end(obj);
        return json(200, meta(name));
      }
      return json(404, { error: { code: 404, message: `not in the stand-in: ${req.method} ${url.pathname}` } });
    });
  });
  await new Promise<void>((r) => server.listen(0, address, r));
  return {
    port: (server.address() as AddressInfo).port,
    seen,
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}
