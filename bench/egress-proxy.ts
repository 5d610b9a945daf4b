/**
 * Egress proxy figures, every row against a direct baseline measured in the same run on
 * the same loopback upstream:
 *  - HTTP keep-alive, 16 connections and 1 connection, with a header rule injecting;
 *  - HTTPS keep-alive inside interception (CONNECT once per connection, then requests in TLS);
 *  - a new intercepted TLS connection per request;
 *  - the same rows through two references: a naive Node forward proxy (http.request piping, no
 *    rules; CONNECT is a plain tunnel, so its HTTPS rows are not interception) and mitmproxy
 *    (Debian package `mitmproxy`, `mitmdump` with a header-injection addon);
 *  - our proxy's CPU per keep-alive request, and its memory with 100 sandboxes and 1,000 open
 *    intercepted connections.
 * Each process (upstream, proxy, load generator) is separate; on a 2-core machine they compete,
 * as they would for a sandbox host. Run: node bin/run-ts.js bench/egress-proxy.ts [seconds-per-row]
 */
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import fs from "node:fs";
import http from "node:http";
import https from "node:https";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import tls from "node:tls";

const ROLE = process.argv[2]?.startsWith("--role=") ? process.argv[2].slice(7) : null;
const SECONDS = Number(ROLE ? 0 : (process.argv[2] ?? 4));
const UP_ADDR = "127.0.0.2";
const NAME = "api.bench";
const BODY = JSON.stringify({ ok: true, message: "hello from the upstream", n: 42 });

// ------------------------------------------------------------------------------------ roles

async function roleUpstream(): Promise<void> {
  const [certFile, keyFile] = process.argv.slice(3);
  const handler = (_req: http.IncomingMessage, res: http.ServerResponse) => {
    res.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(BODY) });
    res.end(BODY);
  };
  const h = http.createServer({ keepAliveTimeout: 60_000 }, handler);
  const s = https.createServer({ cert: fs.readFileSync(certFile), key: fs.readFileSync(keyFile), keepAliveTimeout: 60_000 }, handler);
  await new Promise<void>((r) => h.listen(0, UP_ADDR, r));
  await new Promise<void>((r) => s.listen(0, UP_ADDR, r));
  console.log(JSON.stringify({ http: (h.address() as net.AddressInfo).port, https: (s.address() as net.AddressInfo).port }));
}

async function roleOurs(): Promise<void> {
  const [hosts, caFile, sandboxes] = [process.argv[3], process.argv[4], Number(process.argv[5] ?? 1)];
  const { EgressProxy } = await import("../src/egress/proxy/egress-proxy.ts");
  const { loadEgressSettings } = await import("../src/egress/egress-settings.ts");
  const { createCa, LeafMinter } = await import("../src/egress/proxy/certificates.ts");
  const { SandboxPolicy } = await import("../src/egress/policy/policy.ts");
  const { toStoredConfig, proxyConfigSchema } = await import("../src/egress/config/proxy-config.ts");
  const settings = loadEgressSettings({ WHARF_EGRESS_HOSTS: hosts, WHARF_EGRESS_ALLOW_INTERNAL: `${UP_ADDR}/32`, WHARF_EGRESS_UPSTREAM_CA_FILE: caFile, WHARF_EGRESS_SYSTEM_DNS: "0" });
  const audited = { n: 0 };
  const proxy = new EgressProxy({ settings, audit: { record: () => void audited.n++ } });
  const ca = await createCa("bench sandbox CA");
  fs.writeFileSync(path.join(path.dirname(caFile), "sandbox-ca.pem"), ca.certPem);
  const minter = new LeafMinter(ca);
  const stored = await toStoredConfig(
    proxyConfigSchema.parse({
      rules: [
        { name: "other", match_hosts: ["other.bench", "*.other.bench"], headers: [{ name: "X-Other", type: "plaintext", value: "x" }] },
        { name: "bench", match_hosts: [NAME], match_paths: ["/v1/*", "/"], headers: [{ name: "Authorization", type: "plaintext", value: "Bearer injected-by-proxy" }] },
      ],
    }),
    async () => "unused",
  );
  const ports: number[] = [];
  for (let i = 0; i < sandboxes; i++) {
    proxy.addSandbox({ id: `s${i}`, workspaceId: "w", policy: new SandboxPolicy(stored, { secrets: new Map(), sealed: new Map() }), minter });
    ports.push(((await proxy.listenExplicit(`s${i}`)).address() as net.AddressInfo).port);
  }
  console.log(JSON.stringify({ ports }));
}

/** The floor a naive Node forward proxy reaches: absolute-form via http.request, CONNECT as a pipe. */
async function roleNaive(): Promise<void> {
  const map: Record<string, { host: string; port: number }> = JSON.parse(process.argv[3]);
  const agent = new http.Agent({ keepAlive: true, maxSockets: 256 });
  const server = http.createServer((req, res) => {
    const u = new URL(req.url!);
    const to = map[`${u.hostname}:${u.port || 80}`];
    const up = http.request({ host: to.host, port: to.port, method: req.method, path: u.pathname + u.search, headers: req.headers, agent }, (r) => {
      res.writeHead(r.statusCode!, r.headers);
      r.pipe(res);
    });
    up.on("error", () => res.destroy());
    req.pipe(up);
  });
  server.on("connect", (req, socket: net.Socket, head) => {
    const to = map[req.url!];
    const up = net.connect(to.port, to.host, () => {
      socket.write("HTTP/1.1 200 Connection Established\r\n\r\n");
      if (head.length) up.write(head);
      socket.pipe(up);
      up.pipe(socket);
    });
    up.on("error", () => socket.destroy());
    socket.on("error", () => up.destroy());
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  console.log(JSON.stringify({ port: (server.address() as net.AddressInfo).port }));
}

// ------------------------------------------------------------------------------------ load

interface Row {
  name: string;
  rps: number;
  p50: number;
  errors: number;
  requests: number;
}

type Stream = net.Socket | tls.TLSSocket;

/** Reads one HTTP/1.1 response (Content-Length or chunked) from a stream; resolves with the status. */
function readResponse(s: Stream, state: { buf: Buffer }): Promise<number> {
  return new Promise((resolve, reject) => {
    const tryParse = (): boolean => {
      const end = state.buf.indexOf("\r\n\r\n");
      if (end < 0) return false;
      const head = state.buf.subarray(0, end).toString("latin1");
      const status = Number(head.slice(9, 12));
      const cl = /\r\ncontent-length:\s*(\d+)/i.exec(head);
      let total: number;
      if (cl) total = end + 4 + Number(cl[1]);
      else if (/\r\ntransfer-encoding:\s*chunked/i.test(head)) {
        const z = state.buf.indexOf("\r\n0\r\n\r\n", end);
        if (z < 0) return false;
        total = z + 7;
      } else total = end + 4;
      if (state.buf.length < total) return false;
      state.buf = state.buf.subarray(total);
      cleanup();
      resolve(status);
      return true;
    };
    const onData = (d: Buffer) => {
      state.buf = state.buf.length ? Buffer.concat([state.buf, d]) : d;
      tryParse();
    };
    const onErr = (e: Error) => {
      cleanup();
      reject(e);
    };
    const onClose = () => onErr(new Error("closed"));
    const cleanup = () => {
      s.off("data", onData);
      s.off("error", onErr);
      s.off("close", onClose);
    };
    s.on("data", onData);
    s.once("error", onErr);
    s.once("close", onClose);
    if (state.buf.length) tryParse();
  });
}

function connectTcp(port: number, host = "127.0.0.1"): Promise<net.Socket> {
  return new Promise((resolve, reject) => {
    const s = net.connect({ port, host, noDelay: true }, () => resolve(s));
    s.once("error", reject);
  });
}

async function connectTunnel(proxyPort: number, authority: string): Promise<net.Socket> {
  const s = await connectTcp(proxyPort);
  s.write(`CONNECT ${authority} HTTP/1.1\r\nHost: ${authority}\r\n\r\n`);
  const state = { buf: Buffer.alloc(0) };
  const status = await readResponse(s, state);
  if (status !== 200) throw new Error(`CONNECT ${status}`);
  return s;
}

function startTls(socket: net.Socket | null, opts: tls.ConnectionOptions): Promise<tls.TLSSocket> {
  return new Promise((resolve, reject) => {
    const t = tls.connect({ ...opts, ...(socket ? { socket } : {}), ALPNProtocols: ["http/1.1"], session: undefined });
    t.once("secureConnect", () => resolve(t));
    t.once("error", reject);
  });
}

interface Target {
  /** Opens a ready stream (plain or TLS) to send requests on. */
  open(): Promise<Stream>;
  request: Buffer;
}

async function measure(name: string, target: Target, connections: number, newConnPerRequest = false, seconds = SECONDS): Promise<Row> {
  const latencies: number[] = [];
  let errors = 0;
  let measuring = false;
  const stopAt = performance.now() + 500 + seconds * 1000;
  const startAt = performance.now() + 500;
  const loop = async () => {
    let s: Stream | null = null;
    let state = { buf: Buffer.alloc(0) };
    while (performance.now() < stopAt) {
      const t0 = performance.now();
      try {
        if (!s) {
          s = await target.open();
          state = { buf: Buffer.alloc(0) };
        }
        s.write(target.request);
        const status = await readResponse(s, state);
        if (status !== 200) errors++;
        if (newConnPerRequest) {
          s.destroy();
          s = null;
        }
      } catch {
        errors++;
        s?.destroy();
        s = null;
        continue;
      }
      const t1 = performance.now();
      if (t0 >= startAt) {
        measuring = true;
        latencies.push(t1 - t0);
      }
    }
    s?.destroy();
  };
  await Promise.all(Array.from({ length: connections }, loop));
  void measuring;
  latencies.sort((a, b) => a - b);
  return { name, rps: latencies.length / seconds, p50: latencies[Math.floor(latencies.length / 2)] ?? NaN, errors, requests: latencies.length };
}

// ------------------------------------------------------------------------------------ main

function spawnRole(args: string[], env: Record<string, string> = {}): Promise<{ child: ChildProcess; info: any }> {
  const prof = process.env.BENCH_PROF && args[0] === "--role=ours" ? ["--cpu-prof", `--cpu-prof-dir=${process.env.BENCH_PROF}`] : [];
  const child = spawn(process.execPath, [...prof, path.resolve("bin/run-ts.js"), path.resolve("bench/egress-proxy.ts"), ...args], { stdio: ["ignore", "pipe", "inherit"], env: { ...process.env, ...env } });
  return new Promise((resolve, reject) => {
    let out = "";
    child.stdout!.on("data", (d) => {
      out += d;
      const nl = out.indexOf("\n");
      if (nl >= 0) resolve({ child, info: JSON.parse(out.slice(0, nl)) });
    });
    child.once("exit", (code) => reject(new Error(`${args[0]} exited ${code}`)));
  });
}

/** CPU time of a process in µs: [user, system] (system includes the kernel's loopback TCP work). */
function cpuMicros(pid: number): [number, number] {
  const f = fs.readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1].split(" ");
  return [(Number(f[11]) / 100) * 1e6, (Number(f[12]) / 100) * 1e6]; // USER_HZ is 100 on Linux
}

function rssMiB(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(fs.readFileSync(`/proc/${pid}/status`, "utf8"));
  return m ? Number(m[1]) / 1024 : NaN;
}

async function startMitm(dir: string, upHttps: number): Promise<{ child: ChildProcess; port: number; caPem: string } | null> {
  if (spawnSync("mitmdump", ["--version"]).status !== 0) return null;
  const addon = path.join(dir, "inject.py");
  fs.writeFileSync(addon, "def request(flow):\n    flow.request.headers['Authorization'] = 'Bearer injected-by-mitmproxy'\n");
  const port = 20000 + Math.floor(Math.random() * 20000);
  const child = spawn("mitmdump", ["-q", "--listen-host", "127.0.0.1", "--listen-port", String(port), "-s", addon, "--ssl-insecure", "--set", `confdir=${dir}/mitm`, "--set", "http2=false"], { stdio: "ignore" });
  const caFile = path.join(dir, "mitm", "mitmproxy-ca-cert.pem");
  for (let i = 0; i < 200; i++) {
    if (fs.existsSync(caFile)) {
      try {
        await connectTcp(port).then((s) => s.destroy());
        return { child, port, caPem: fs.readFileSync(caFile, "utf8") };
      } catch {}
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  void upHttps;
  child.kill();
  return null;
}

async function main(): Promise<void> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "wharf-bench-egress-"));
  const { createCa, LeafMinter } = await import("../src/egress/proxy/certificates.ts");
  const upCa = await createCa("bench upstream CA");
  const upMinter = new LeafMinter(upCa);
  fs.writeFileSync(path.join(dir, "up-ca.pem"), upCa.certPem);
  fs.writeFileSync(path.join(dir, "up-cert.pem"), await upMinter.certificatePem({ kind: "name", host: NAME }));
  // The minter's leaf key is shared by every leaf; export it for the upstream process.
  const leafKey = await (upMinter as any).keysOnce();
  fs.writeFileSync(path.join(dir, "up-key.pem"), leafKey.keyPem);

  const children: ChildProcess[] = [];
  const up = await spawnRole(["--role=upstream", path.join(dir, "up-cert.pem"), path.join(dir, "up-key.pem")]);
  children.push(up.child);
  const hosts = `${NAME}:80=${UP_ADDR}:${up.info.http},${NAME}:443=${UP_ADDR}:${up.info.https}`;
  const ours = await spawnRole(["--role=ours", hosts, path.join(dir, "up-ca.pem"), "1"]);
  children.push(ours.child);
  const oursPort = ours.info.ports[0];
  const sandboxCa = fs.readFileSync(path.join(dir, "sandbox-ca.pem"), "utf8");
  const naive = await spawnRole(["--role=naive", JSON.stringify({ [`${NAME}:80`]: { host: UP_ADDR, port: up.info.http }, [`${NAME}:443`]: { host: UP_ADDR, port: up.info.https } })]);
  children.push(naive.child);
  const mitm = await startMitm(dir, up.info.https);
  if (mitm) children.push(mitm.child);

  const originReq = Buffer.from(`GET /v1/items HTTP/1.1\r\nHost: ${NAME}\r\nUser-Agent: bench\r\n\r\n`);
  const absReq = Buffer.from(`GET http://${NAME}/v1/items HTTP/1.1\r\nHost: ${NAME}\r\nUser-Agent: bench\r\n\r\n`);
  const mitmAbsReq = Buffer.from(`GET http://${UP_ADDR}:${up.info.http}/v1/items HTTP/1.1\r\nHost: ${UP_ADDR}:${up.info.http}\r\nUser-Agent: bench\r\n\r\n`);
  const tlsOpts = (ca: string) => ({ servername: NAME, ca, rejectUnauthorized: true });

  const directHttp: Target = { open: () => connectTcp(up.info.http, UP_ADDR), request: originReq };
  const oursHttp: Target = { open: () => connectTcp(oursPort), request: absReq };
  const naiveHttp: Target = { open: () => connectTcp(naive.info.port), request: absReq };
  const mitmHttp: Target | null = mitm ? { open: () => connectTcp(mitm.port), request: mitmAbsReq } : null;
  const directHttps: Target = { open: () => startTls(null, { host: UP_ADDR, port: up.info.https, ...tlsOpts(upCa.certPem) }), request: originReq };
  const oursHttps: Target = { open: async () => startTls(await connectTunnel(oursPort, `${NAME}:443`), tlsOpts(sandboxCa)), request: originReq };
  const naiveHttps: Target = { open: async () => startTls(await connectTunnel(naive.info.port, `${NAME}:443`), tlsOpts(upCa.certPem)), request: originReq };
  const mitmHttps: Target | null = mitm ? { open: async () => startTls(await connectTunnel(mitm.port, `${UP_ADDR}:${up.info.https}`), tlsOpts(mitm.caPem)), request: originReq } : null;

  // Sanity: the rule injects.
  {
    const s = await oursHttps.open();
    s.write(Buffer.from(`GET / HTTP/1.1\r\nHost: ${NAME}\r\n\r\n`));
    await readResponse(s, { buf: Buffer.alloc(0) });
    s.destroy();
  }

  const rows: Array<{ group: string; base: Row; rows: Row[]; cpu?: [number, number]; upCpu?: [number, number] }> = [];
  const perRequest = (a: [number, number], b: [number, number], n: number): [number, number] => [(b[0] - a[0]) / Math.max(1, n), (b[1] - a[1]) / Math.max(1, n)];
  const group = async (name: string, conns: number, newConn: boolean, base: Target, targets: Array<[string, Target | null]>) => {
    const u0 = cpuMicros(up.child.pid!);
    const b = await measure(`direct`, base, conns, newConn);
    const upCpu = perRequest(u0, cpuMicros(up.child.pid!), b.requests);
    const out: Row[] = [];
    let cpu: [number, number] | undefined;
    for (const [n, t] of targets) {
      if (!t) continue;
      const c0 = cpuMicros(ours.child.pid!);
      const r = await measure(n, t, conns, newConn);
      if (n === "wharf egress") cpu = perRequest(c0, cpuMicros(ours.child.pid!), r.requests);
      out.push(r);
    }
    rows.push({ group: name, base: b, rows: out, cpu, upCpu });
  };

  await group("HTTP keep-alive, 16 conns, header rule", 16, false, directHttp, [["wharf egress", oursHttp], ["naive Node proxy", naiveHttp], ["mitmproxy", mitmHttp]]);
  await group("HTTP keep-alive, 1 conn, header rule", 1, false, directHttp, [["wharf egress", oursHttp], ["naive Node proxy", naiveHttp], ["mitmproxy", mitmHttp]]);
  await group("HTTPS keep-alive inside interception, 16 conns", 16, false, directHttps, [["wharf egress", oursHttps], ["naive Node proxy (tunnel only)", naiveHttps], ["mitmproxy", mitmHttps]]);
  await group("new intercepted TLS connection per request, 8 conns", 8, true, directHttps, [["wharf egress", oursHttps], ["naive Node proxy (tunnel only)", naiveHttps], ["mitmproxy", mitmHttps]]);

  for (const c of children) c.kill("SIGTERM");

  // Memory: 100 sandboxes, 1,000 open intercepted connections (10 per sandbox).
  const mem = await spawnRole(["--role=ours", hosts, path.join(dir, "up-ca.pem"), "100"]);
  const up2 = await spawnRole(["--role=upstream", path.join(dir, "up-cert.pem"), path.join(dir, "up-key.pem")]);
  void up2;
  const ca2 = fs.readFileSync(path.join(dir, "sandbox-ca.pem"), "utf8");
  await new Promise((r) => setTimeout(r, 300));
  const rssIdle = rssMiB(mem.child.pid!);
  const open: Stream[] = [];
  const hosts2 = hosts; // same upstream mapping (the child was started with it)
  void hosts2;
  for (let i = 0; i < 1000; i++) {
    const port = mem.info.ports[i % 100];
    // These tunnels go to the first upstream process, already stopped: open the TLS leg and keep it.
    const s = await startTls(await connectTunnel(port, `${NAME}:443`), tlsOpts(ca2));
    open.push(s);
  }
  await new Promise((r) => setTimeout(r, 500));
  const rssOpen = rssMiB(mem.child.pid!);
  for (const s of open) s.destroy();
  mem.child.kill("SIGKILL");
  up2.child.kill("SIGKILL");
  fs.rmSync(dir, { recursive: true, force: true });

  // Report.
  const fmt = (n: number, d = 0) => (Number.isFinite(n) ? n.toFixed(d) : "-");
  console.log(`\nEgress proxy benchmark (${SECONDS}s per row, Node ${process.version}, ${os.cpus().length} cores; mitmproxy ${mitm ? "8 via mitmdump" : "NOT INSTALLED (apt-get install mitmproxy)"})\n`);
  console.log("| scenario | proxy | req/s | p50 ms | × direct | errors |");
  console.log("|---|---|---:|---:|---:|---:|");
  for (const g of rows) {
    console.log(`| ${g.group} | direct | ${fmt(g.base.rps)} | ${fmt(g.base.p50, 2)} | 1.00 | ${g.base.errors} |`);
    for (const r of g.rows) console.log(`| ${g.group} | ${r.name} | ${fmt(r.rps)} | ${fmt(r.p50, 2)} | ${fmt(r.rps / g.base.rps, 2)} | ${r.errors} |`);
  }
  console.log("");
  for (const g of rows) {
    if (!g.cpu || !g.upCpu) continue;
    console.log(`${g.group}: wharf egress CPU per request ${fmt(g.cpu[0] + g.cpu[1], 0)} µs (user ${fmt(g.cpu[0], 0)} + kernel ${fmt(g.cpu[1], 0)}); the upstream server itself, direct: ${fmt(g.upCpu[0] + g.upCpu[1], 0)} µs (user ${fmt(g.upCpu[0], 0)} + kernel ${fmt(g.upCpu[1], 0)})`);
  }
  console.log(`memory: 100 sandboxes idle ${fmt(rssIdle, 1)} MiB RSS; with 1,000 open intercepted TLS connections ${fmt(rssOpen, 1)} MiB (+${fmt(((rssOpen - rssIdle) * 1024) / 1000, 1)} KiB per connection)`);
}

if (ROLE) process.on("SIGTERM", () => process.exit(0));
if (ROLE === "upstream") await roleUpstream();
else if (ROLE === "ours") await roleOurs();
else if (ROLE === "naive") await roleNaive();
else await main();
