/**
 * Figures for the cloud credential engines, each against a baseline from the same run:
 *  1. added latency of SigV4 re-signing a small request vs the same request through a plain
 *     header rule, both through the same loopback HTTP hop to the same upstream (keep-alive, 1 conn);
 *  2. a 1 GiB chunk-signed (STREAMING-AWS4-HMAC-SHA256-PAYLOAD) upload re-signed through the engine:
 *     throughput vs an identity pass-through of the same bytes, and peak RSS over the baseline;
 *  3. callback resolution: cache hit vs miss (loopback callback server).
 * Run: node bin/run-ts.js bench/egress-cloud-engines.ts [requests] [GiB]
 */
import crypto from "node:crypto";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { PassThrough, Readable, Writable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { createAwsSigningEngine } from "../src/egress/credentials/cloud/aws-signing-engine.ts";
import { CallbackResolver } from "../src/egress/credentials/cloud/callback-resolver.ts";
import { pairsFromRawHeaders, replaceHeader, type HeaderPairs } from "../src/egress/credentials/cloud/header-pairs.ts";
import { AWS_PLACEHOLDER_ACCESS_KEY_ID } from "../src/egress/credentials/cloud/placeholder-credentials.ts";

const REQUESTS = Number(process.argv[2] ?? 5000);
const GIB = Number(process.argv[3] ?? 1);
const REAL = { accessKeyId: "AKIABENCHBENCHBENCH1", secretAccessKey: "bench-secret-bench-secret-bench-secret-0" };
const engine = createAwsSigningEngine({ credentials: REAL });

const pct = (xs: number[], p: number) =>
  [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(xs.length * p))];
const listen = async (s: http.Server) => {
  await new Promise<void>((r) => s.listen(0, "127.0.0.1", r));
  return (s.address() as AddressInfo).port;
};

// ---------- 1. small-request latency: header rule vs SigV4 re-signing ----------
async function latencyRows() {
  const upstream = http.createServer((req, res) => {
    req.resume();
    req.on("end", () => res.writeHead(200, { "content-length": "2" }).end("ok"));
  });
  const upPort = await listen(upstream);
  const upAgent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  const forward = (req: http.IncomingMessage, res: http.ServerResponse, headers: HeaderPairs) => {
    const up = http.request(
      {
        host: "127.0.0.1",
        port: upPort,
        method: req.method,
        path: req.url,
        headers: headers.filter(([n]) => n.toLowerCase() !== "connection").flat(),
        agent: upAgent,
      },
      (r) => {
        res.writeHead(r.statusCode ?? 502, r.rawHeaders);
        r.pipe(res);
      },
    );
    req.pipe(up);
  };
  const hop = http.createServer(async (req, res) => {
    const headers = pairsFromRawHeaders(req.rawHeaders);
    if (req.url?.startsWith("/rule"))
      return forward(req, res, replaceHeader(headers, "authorization", "Bearer injected-by-a-header-rule"));
    const out = await engine.handle({
      method: req.method ?? "GET",
      host: "bkt.s3.us-east-1.amazonaws.com",
      target: req.url ?? "/",
      headers,
      body: null,
    });
    if (out.action !== "signed") return res.writeHead(500).end(out.action);
    forward(req, res, out.headers);
  });
  const hopPort = await listen(hop);
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  const amzDate = new Date().toISOString().replace(/[-:]/g, "").replace(/\.\d+/, "");
  const sdkHeaders = {
    host: "bkt.s3.us-east-1.amazonaws.com",
    "x-amz-date": amzDate,
    "x-amz-content-sha256": "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    "x-amz-user-agent": "aws-sdk-js/3.0",
    "amz-sdk-invocation-id": crypto.randomUUID(),
    "amz-sdk-request": "attempt=1; max=3",
    authorization: `AWS4-HMAC-SHA256 Credential=${AWS_PLACEHOLDER_ACCESS_KEY_ID}/${amzDate.slice(0, 8)}/us-east-1/s3/aws4_request, SignedHeaders=amz-sdk-invocation-id;amz-sdk-request;host;x-amz-content-sha256;x-amz-date;x-amz-user-agent, Signature=${"0".repeat(64)}`,
  };
  const one = (path: string) =>
    new Promise<number>((resolve, reject) => {
      const t0 = performance.now();
      http
        .get({ host: "127.0.0.1", port: hopPort, path, headers: sdkHeaders, agent }, (res) => {
          res.resume();
          res.on("end", () =>
            res.statusCode === 200 ? resolve(performance.now() - t0) : reject(new Error(`status ${res.statusCode}`)),
          );
        })
        .on("error", reject);
    });
  const run = async (path: string) => {
    for (let i = 0; i < 300; i++) await one(path);
    const lat: number[] = [];
    const t0 = performance.now();
    for (let i = 0; i < REQUESTS; i++) lat.push(await one(path));
    return { rps: REQUESTS / ((performance.now() - t0) / 1000), p50: pct(lat, 0.5), p99: pct(lat, 0.99) };
  };
  // Interleave two rounds each to even out drift.
  const rule1 = await run("/rule/list?list-type=2&prefix=a%20b");
  const sign1 = await run("/sign/list?list-type=2&prefix=a%20b");
  const rule2 = await run("/rule/list?list-type=2&prefix=a%20b");
  const sign2 = await run("/sign/list?list-type=2&prefix=a%20b");
  const rule = { rps: (rule1.rps + rule2.rps) / 2, p50: (rule1.p50 + rule2.p50) / 2, p99: (rule1.p99 + rule2.p99) / 2 };
  const sign = { rps: (sign1.rps + sign2.rps) / 2, p50: (sign1.p50 + sign2.p50) / 2, p99: (sign1.p99 + sign2.p99) / 2 };
  // The engine alone, per call.
  const headers = pairsFromRawHeaders(Object.entries(sdkHeaders).flat());
  for (let i = 0; i < 2000; i++)
    await engine.handle({ method: "GET", host: sdkHeaders.host, target: "/x?list-type=2", headers, body: null });
  const n = 20000;
  const t0 = performance.now();
  for (let i = 0; i < n; i++)
    await engine.handle({ method: "GET", host: sdkHeaders.host, target: "/x?list-type=2", headers, body: null });
  const engineUs = ((performance.now() - t0) / n) * 1000;
  agent.destroy();
  upAgent.destroy();
  hop.close();
  upstream.close();
  return { rule, sign, engineUs };
}

// ---------- 2. 1 GiB chunk-signed stream ----------
const CHUNK = 64 * 1024;
function chunkedSource(totalBytes: number): Readable {
  const data = crypto.randomBytes(CHUNK);
  const head = Buffer.from(`${CHUNK.toString(16)};chunk-signature=${"0".repeat(64)}\r\n`);
  const crlf = Buffer.from("\r\n");
  let sent = 0;
  let finished = false;
  return new Readable({
    read() {
      if (finished) return;
      for (let i = 0; i < 16; i++) {
        if (sent >= totalBytes) {
          this.push(Buffer.from(`0;chunk-signature=${"0".repeat(64)}\r\n\r\n`));
          this.push(null);
          finished = true;
          return;
        }
        sent += CHUNK;
        if (!this.push(Buffer.concat([head, data, crlf]))) return;
      }
    },
  });
}

function counter(): Writable & { bytes: number } {
  const w = new Writable({
    write(chunk: Buffer, _e, done) {
      (w as Writable & { bytes: number }).bytes += chunk.length;
      done();
    },
  }) as Writable & { bytes: number };
  w.bytes = 0;
  return w;
}

async function streamRow(kind: "identity" | "resign") {
  const total = Math.round(GIB * 1024 * 1024 * 1024);
  const body = chunkedSource(total);
  global.gc?.();
  const rssBefore = process.memoryUsage().rss;
  let peak = rssBefore;
  const sampler = setInterval(() => (peak = Math.max(peak, process.memoryUsage().rss)), 25);
  const t0 = performance.now();
  const sink = counter();
  if (kind === "identity") await pipeline(body, new PassThrough(), sink);
  else {
    const amzDate = new Date().toISOString().replace(/[-:]/g, "").replace(/\.\d+/, "");
    const out = await engine.handle({
      method: "PUT",
      host: "bkt.s3.us-east-1.amazonaws.com",
      target: "/big.bin",
      body,
      headers: [
        ["host", "bkt.s3.us-east-1.amazonaws.com"],
        ["x-amz-date", amzDate],
        ["x-amz-content-sha256", "STREAMING-AWS4-HMAC-SHA256-PAYLOAD"],
        ["content-encoding", "aws-chunked"],
        [
          "authorization",
          `AWS4-HMAC-SHA256 Credential=${AWS_PLACEHOLDER_ACCESS_KEY_ID}/${amzDate.slice(0, 8)}/us-east-1/s3/aws4_request, SignedHeaders=content-encoding;host;x-amz-content-sha256;x-amz-date, Signature=${"0".repeat(64)}`,
        ],
      ],
    });
    if (out.action !== "signed") throw new Error("not signed");
    await pipeline(out.body!, sink);
  }
  const seconds = (performance.now() - t0) / 1000;
  clearInterval(sampler);
  // The kernel's high-water mark too, in case a peak fell between samples.
  peak = Math.max(peak, process.resourceUsage().maxRSS * 1024);
  return { mbps: sink.bytes / seconds / 1e6, seconds, rssBefore, peakDelta: peak - rssBefore, peak };
}

// ---------- 3. callback cache hit vs miss ----------
async function callbackRows() {
  const server = http.createServer((req, res) => {
    req.resume();
    req.on("end", () =>
      res
        .writeHead(200, { "content-type": "application/json" })
        .end(JSON.stringify({ headers: { Authorization: "Bearer from-callback" } })),
    );
  });
  const port = await listen(server);
  const resolver = new CallbackResolver();
  const spec = {
    url: `http://127.0.0.1:${port}/resolve`,
    requestHeaders: [{ name: "X-Key", value: "k" }],
    ttlSeconds: 3600,
  };
  for (let i = 0; i < 200; i++) await resolver.resolve(spec, `warm${i}.example.com`, 443);
  const miss: number[] = [];
  for (let i = 0; i < 1000; i++) {
    const t0 = performance.now();
    await resolver.resolve(spec, `h${i}.example.com`, 443);
    miss.push(performance.now() - t0);
  }
  const hit: number[] = [];
  for (let i = 0; i < 20000; i++) {
    const t0 = performance.now();
    await resolver.resolve(spec, `h${i % 1000}.example.com`, 443);
    hit.push(performance.now() - t0);
  }
  server.closeAllConnections();
  server.close();
  return { missP50: pct(miss, 0.5), missP99: pct(miss, 0.99), hitP50: pct(hit, 0.5), hitP99: pct(hit, 0.99) };
}

// Each stream row runs in a fresh process so its RSS is its own.
const rowArg = process.argv.find((a) => a.startsWith("--stream-row="));
if (rowArg) {
  console.log(JSON.stringify(await streamRow(rowArg.split("=")[1] as "identity" | "resign")));
  process.exit(0);
}
async function streamRowIsolated(kind: "identity" | "resign"): Promise<Awaited<ReturnType<typeof streamRow>>> {
  const { execFileSync } = await import("node:child_process");
  const { fileURLToPath } = await import("node:url");
  const runner = fileURLToPath(new URL("../bin/run-ts.js", import.meta.url));
  const out = execFileSync(
    process.execPath,
    [runner, fileURLToPath(import.meta.url), String(REQUESTS), String(GIB), `--stream-row=${kind}`],
    { encoding: "utf8" },
  );
  return JSON.parse(out.trim().split("\n").at(-1)!);
}
const lat = await latencyRows();
const identity = await streamRowIsolated("identity");
const resign = await streamRowIsolated("resign");
const cb = await callbackRows();
const mb = (b: number) => `${(b / 1024 / 1024).toFixed(1)} MiB`;
console.log(`\nEgress cloud engines — Node ${process.version}, ${REQUESTS} requests per row, ${GIB} GiB stream\n`);
console.log("| row | figure | baseline | ratio |");
console.log("|---|---|---|---|");
console.log(
  `| small S3 GET through a loopback hop, keep-alive, 1 conn: p50 with SigV4 re-signing vs header rule | ${(lat.sign.p50 * 1000).toFixed(0)} µs | ${(lat.rule.p50 * 1000).toFixed(0)} µs | ${(lat.sign.p50 / lat.rule.p50).toFixed(2)}× (+${((lat.sign.p50 - lat.rule.p50) * 1000).toFixed(0)} µs) |`,
);
console.log(
  `| same, p99 | ${(lat.sign.p99 * 1000).toFixed(0)} µs | ${(lat.rule.p99 * 1000).toFixed(0)} µs | ${(lat.sign.p99 / lat.rule.p99).toFixed(2)}× |`,
);
console.log(
  `| same, requests/s | ${lat.sign.rps.toFixed(0)} | ${lat.rule.rps.toFixed(0)} | ${(lat.sign.rps / lat.rule.rps).toFixed(2)}× |`,
);
console.log(`| engine.handle() alone per small request (CPU) | ${lat.engineUs.toFixed(1)} µs | — | — |`);
console.log(
  `| ${GIB} GiB chunk-signed upload re-signed (64 KiB chunks), throughput vs identity pass-through | ${resign.mbps.toFixed(0)} MB/s (${resign.seconds.toFixed(1)} s) | ${identity.mbps.toFixed(0)} MB/s | ${(resign.mbps / identity.mbps).toFixed(2)}× |`,
);
console.log(
  `| same, peak RSS over start (start ${mb(resign.rssBefore)}) | +${mb(resign.peakDelta)} (peak ${mb(resign.peak)}) | +${mb(identity.peakDelta)} | flat: ${resign.peakDelta < 64 * 1024 * 1024 ? "yes" : "NO"} |`,
);
console.log(
  `| callback resolution p50: cache hit vs miss (loopback callback) | ${(cb.hitP50 * 1000).toFixed(1)} µs | ${(cb.missP50 * 1000).toFixed(0)} µs | ${(cb.missP50 / cb.hitP50).toFixed(0)}× faster on a hit |`,
);
console.log(
  `| callback resolution p99: hit vs miss | ${(cb.hitP99 * 1000).toFixed(1)} µs | ${(cb.missP99 * 1000).toFixed(0)} µs | — |`,
);
process.exit(0);
