// The thinnest HTTP client Node has, for latency figures that should hold the server's time and not
// the client's: `node:http` on kept-alive sockets. On the benchmark machine undici's `fetch` adds
// 0.15 ms to a request when warm and about 0.4 ms after an idle gap, on top of what a server does.
import http from "node:http";

const agent = new http.Agent({ keepAlive: true, maxSockets: 64 });

export interface LeanResponse {
  status: number;
  text: string;
}

/** POST a JSON body; resolves with the status and the whole body as text. */
export function postJson(url: string, body: string, headers: Record<string, string> = {}): Promise<LeanResponse> {
  const u = new URL(url);
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        host: u.hostname,
        port: u.port,
        path: u.pathname + u.search,
        method: "POST",
        agent,
        headers: { "content-type": "application/json", "content-length": Buffer.byteLength(body), ...headers },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString("utf8") }));
        res.on("error", reject);
      },
    );
    req.on("error", reject);
    req.end(body);
  });
}

/**
 * Milliseconds for one POST of a JSON body whose answer must be 200 and contain `expect`, through
 * the lean client or through `fetch` (the figure a fetch client sees).
 */
export async function timedPost(
  url: string,
  body: string,
  o: { expect: string; via?: "lean" | "fetch"; headers?: Record<string, string>; name?: string },
): Promise<number> {
  const t0 = performance.now();
  let status: number;
  let text: string;
  if (o.via === "fetch") {
    const r = await fetch(url, { method: "POST", headers: { "content-type": "application/json", ...o.headers }, body });
    [status, text] = [r.status, await r.text()];
  } else {
    ({ status, text } = await postJson(url, body, o.headers));
  }
  if (status !== 200 || !text.includes(o.expect))
    throw new Error(`${o.name ? `${o.name}: ` : ""}bad answer ${status}: ${text.slice(0, 200)}`);
  return performance.now() - t0;
}
