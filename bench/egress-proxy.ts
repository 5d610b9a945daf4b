/**
 * Egress proxy figures, every row against a direct baseline measured in the same run on the same
 * loopback upstream (and against a naive Node proxy, same run):
 *  - HTTP keep-alive, 16 connections and 1 connection, with a header rule injecting (explicit
 *    proxy, absolute-form requests);
 *  - HTTPS keep-alive inside interception (a captured connection to api.bench:443: TLS terminated
 *    with a minted leaf, the rule injects, upstream over TLS);
 *  - a new intercepted TLS connection per request (`Connection: close`);
 *  - HTTP/2 inside interception (h2 from the client, h2 upstream), 16 connections × 1 and × 10 streams;
 *  - the proxy's CPU per keep-alive request (data-plane child + control plane), and the data
 *    plane's memory with 100 sandboxes and 1,000, then 2,000 open intercepted connections.
 * Our proxy runs as the platform runs it: the control plane hands the listeners to the supervised
 * data-plane child, which accepts on them (`--local`: in one process instead).
 * Load: wrk (HTTP/1.1) and h2load (HTTP/2) when installed (`apt-get install wrk nghttp2-client`);
 * without wrk the HTTP/1.1 rows fall back to a Node client, which is itself the bottleneck.
 * Each process (upstream, proxy, load generator) is separate; on a 2-core machine they compete, as
 * they would on a sandbox host.
 * Run: node bin/run-ts.js bench/egress-proxy.ts [seconds-per-row] [--rounds=N] [--only=text] [--local]
 * (BENCH_PROF=dir writes a CPU profile of the data-plane child.)
 */
import { execSync, spawn, type ChildProcess } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { BODY, H2_NAME, NAME, UP_ADDR, roleNaive, roleOurs, roleUpstream } from "./egress-proxy/roles.ts";
import {
  connectTcp,
  connectTunnel,
  measureNode,
  startTls,
  type NodeTarget,
  type Stream,
} from "./egress-proxy/load-node.ts";
import { h2load, hasTool, wrk, type H2Target, type Row, type WrkTarget } from "./egress-proxy/load-tools.ts";

const ROLE = process.argv[2]?.startsWith("--role=") ? process.argv[2].slice(7) : null;
const flags = process.argv.slice(2).filter((a) => a.startsWith("--"));
const flag = (name: string): string | undefined =>
  flags.find((f) => f.startsWith(`--${name}=`))?.slice(name.length + 3);
const SECONDS = Number(process.argv.slice(2).find((a) => !a.startsWith("--")) ?? 4);
const ROUNDS = Number(flag("rounds") ?? 1);
const ONLY = flag("only");
const LOCAL = flags.includes("--local");
/** `--before=REV`: the same rows through the proxy of that git revision too (its src/ extracted; this benchmark's roles). */
const BEFORE = flag("before");

/** What each optimisation bought, measured with this benchmark before and after the change (same machine). */
const CHANGES: string[] = [
  "HTTP/1.1 from the sandbox through the proxy's own front on llhttp (proxy/http1/h1-front.ts) instead of http.Server: minimal proxies of front + upstream client measured back to back (wrk -c16) 43-48 -> 28-31 µs user CPU per request, a server answering by itself ~20 -> ~10 µs; full proxy in one run with --before=2aee923 --rounds=3 (quiet machine): 16 connections 97 -> 67 µs per request and 0.31 -> 0.43x direct, one connection 1.24 -> 1.31x naive, HTTPS inside interception 137 -> 91 µs and 0.32 -> 0.48x direct; a new TLS connection and memory per connection unchanged",
  "HTTP/1.1 upstream through the hand-written llhttp client (proxy/http1/h1-upstream.ts) instead of undici: a minimal http.Server + undici Pool.dispatch proxy cost 72-90 µs CPU per request, the same server with the hand-written client 52-54 µs, the server answering by itself 43-57 µs (wrk -c16, load 3.5, measured back to back); full proxy, one run with --before=ef67601 --rounds=3: 1 connection 4541 -> 7917 req/s, p50 0.20 -> 0.11 ms, 126 -> 94 µs per request",
  "no promise per request (cached target read synchronously), no cloud authorizer for sandboxes without cloud rules or callbacks (it built header pairs and awaited a pass per request), audit folded per 20 ms batch before IPC (was one IPC entry per injected request): 16 connections 79 -> 49-52 µs per request (runs 30 min apart at load 11 and 8, so only indicative)",
  "data-plane child with --max-semi-space-size=2: 1,000 open intercepted connections 37.4 -> 23.6-26.4 KiB each (separate runs, 4 and 1 MiB tried); in one run with --before: 42.2 -> 30.5 KiB",
  "HTTP/2 rapid reset (proxy/h2-resets.ts, maxConcurrentStreams 128): the flooding connection is closed after 0.65 s (was: open until the 120 s idle timeout), a healthy session of the sandbox answers at once (test/egress/proxy-http2-malformed.test.ts)",
  "the serving data-plane child accepts on the listeners itself (the control plane keeps an unpolled copy of each): no descriptor pass, IPC message and acknowledgement per connection; one run with --before=ca3b64c --rounds=3: new intercepted TLS connection 1040 -> 626 µs CPU per connection and 0.36 -> 0.55x direct, the control plane's 5.8 KiB per open connection gone; keep-alive rows unchanged",
  "llhttp parsers closed with their connections and closed HTTP/2 sessions' idle timers cleared (Node keeps an unclosed parser, and a destroyed session whose timer is armed, with everything they reach): 66 MiB of RSS growth over 7,278 new intercepted TLS connections -> none; the smaller heap took new TLS connections 706 -> 652 µs",
  "HTTP/2 upstream through Node's own ClientHttp2Session, multiplexed per origin (proxy/h2-upstream.ts), instead of undici's HTTP/2 pool: minimal Node http2 proxies measured back to back with h2load -c16 -m1, undici upstream ~171 µs CPU per request, Node's session ~105 µs; full proxy, one run with --before=16e0e34 --rounds=3: 16 conns x 1 stream 4744 -> 5782 req/s and 294 -> 235 µs per request, x 10 streams 5432 -> 8310 req/s and 260 -> 169 µs",
  "HTTP/2 from the sandbox on Node's raw server streams (proxy/h2-exchange.ts) instead of its compatibility layer (Http2ServerRequest/Response): minimal proxies ~130 -> ~105 µs per request; full proxy, one run with --before=29d6629 --rounds=3: 16 conns x 1 stream 5697 -> 6229 req/s and 250 -> 222 µs per request, x 10 streams 8090 -> 9540 req/s and 179 -> 154 µs",
  "unchanged: the TLS handshake itself (a bare Node TLS server answering by itself costs 320-340 µs per new connection on this machine, the upstream's own https.Server 365 µs)",
];

function spawnRole(args: string[], root = process.cwd()): Promise<{ child: ChildProcess; info: any }> {
  const child = spawn(
    process.execPath,
    [path.join(root, "bin/run-ts.js"), path.join(root, "bench/egress-proxy.ts"), ...args],
    { stdio: ["ignore", "pipe", "inherit"], cwd: root },
  );
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

/** CPU time of processes in µs: [user, system] (system includes the kernel's loopback TCP work). */
function cpuMicros(pids: number[]): [number, number] {
  let u = 0;
  let s = 0;
  for (const pid of pids) {
    const f = fs.readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1].split(" ");
    u += (Number(f[11]) / 100) * 1e6; // USER_HZ is 100 on Linux
    s += (Number(f[12]) / 100) * 1e6;
  }
  return [u, s];
}

function rssMiB(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(fs.readFileSync(`/proc/${pid}/status`, "utf8"));
  return m ? Number(m[1]) / 1024 : NaN;
}

const loadavg = () =>
  os
    .loadavg()
    .map((l) => l.toFixed(2))
    .join(" ");
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

/** One contender of a scenario: how each load generator reaches it. */
interface Contender {
  name: string;
  wrk?: WrkTarget;
  node?: NodeTarget;
  h2?: H2Target;
  /** Ours: measure the CPU of its data plane and control plane. */
  cpu?: { plane: number; control: number };
}

interface Group {
  title: string;
  conns: number;
  streams?: number;
  close?: boolean;
  contenders: Contender[];
}

interface Measured {
  group: Group;
  rows: Map<string, Row[]>;
  /** µs per request of our processes during their rows: data plane [user, system], control plane total. */
  cpu: Map<string, { plane: [number, number]; control: number }>;
  upstreamCpu: number;
}

async function main(): Promise<void> {
  const hasWrk = hasTool("wrk", "-v");
  const hasH2load = hasTool("h2load");
  const hasMitm = hasTool("mitmdump");
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "wharf-bench-egress-"));
  const { createCa, LeafMinter } = await import("../src/egress/proxy/certificates.ts");
  const upCa = await createCa("bench upstream CA");
  const upMinter = new LeafMinter(upCa);
  fs.writeFileSync(path.join(dir, "up-ca.pem"), upCa.certPem);
  fs.writeFileSync(path.join(dir, "up-cert.pem"), await upMinter.certificatePem({ kind: "name", host: NAME }));
  fs.writeFileSync(path.join(dir, "h2-cert.pem"), await upMinter.certificatePem({ kind: "name", host: H2_NAME }));
  // The minter's leaf key is shared by every leaf; export it for the upstream process.
  fs.writeFileSync(path.join(dir, "up-key.pem"), (await (upMinter as any).keysOnce()).keyPem);
  const load0 = loadavg();

  const children: ChildProcess[] = [];
  const up = await spawnRole([
    "--role=upstream",
    path.join(dir, "up-cert.pem"),
    path.join(dir, "up-key.pem"),
    path.join(dir, "h2-cert.pem"),
  ]);
  children.push(up.child);
  const hosts = `${NAME}:80=${UP_ADDR}:${up.info.http},${NAME}:443=${UP_ADDR}:${up.info.https},${H2_NAME}:443=${UP_ADDR}:${up.info.h2}`;
  const ours = await spawnRole([
    "--role=ours",
    hosts,
    path.join(dir, "up-ca.pem"),
    "1",
    LOCAL ? "local" : "supervised",
  ]);
  children.push(ours.child);
  const oursPort: number = ours.info.ports[0];
  const cpuOf = (role: { child: ChildProcess; info: any }) => ({
    plane: role.info.dataPlanePid as number,
    control: role.child.pid!,
  });
  let before: { child: ChildProcess; info: any } | null = null;
  if (BEFORE) {
    // The proxy of another revision, driven by this benchmark's roles (git archive: the work tree is untouched).
    const root = path.join(dir, "before");
    fs.mkdirSync(path.join(root, "bench"), { recursive: true });
    execSync(`git archive ${BEFORE} src | tar -x -C ${root}`);
    fs.symlinkSync(path.resolve("node_modules"), path.join(root, "node_modules"));
    fs.cpSync(path.resolve("bin"), path.join(root, "bin"), { recursive: true });
    fs.cpSync(path.resolve("package.json"), path.join(root, "package.json"));
    fs.cpSync(path.resolve("bench/egress-proxy.ts"), path.join(root, "bench/egress-proxy.ts"));
    fs.cpSync(path.resolve("bench/egress-proxy"), path.join(root, "bench/egress-proxy"), { recursive: true });
    fs.cpSync(path.join(dir, "up-ca.pem"), path.join(root, "up-ca.pem"));
    before = await spawnRole(
      ["--role=ours", hosts, path.join(root, "up-ca.pem"), "1", LOCAL ? "local" : "supervised"],
      root,
    );
    children.push(before.child);
  }
  const beforeName = `wharf egress before (${BEFORE})`;
  const sandboxCa = fs.readFileSync(path.join(dir, "sandbox-ca.pem"), "utf8");
  const naive = await spawnRole([
    "--role=naive",
    JSON.stringify({
      [`${NAME}:80`]: { host: UP_ADDR, port: up.info.http },
      [`${NAME}:443`]: { host: UP_ADDR, port: up.info.https },
      [`${H2_NAME}:443`]: { host: UP_ADDR, port: up.info.h2 },
    }),
  ]);
  children.push(naive.child);
  let mitmPort = 0;
  if (hasMitm) {
    const addon = path.join(dir, "inject.py");
    fs.writeFileSync(
      addon,
      "def request(flow):\n    flow.request.headers['Authorization'] = 'Bearer injected-by-mitmproxy'\n",
    );
    mitmPort = 20000 + Math.floor(Math.random() * 20000);
    children.push(
      spawn(
        "mitmdump",
        [
          "-q",
          "--listen-host",
          "127.0.0.1",
          "--listen-port",
          String(mitmPort),
          "-s",
          addon,
          "--set",
          `confdir=${dir}/mitm`,
        ],
        { stdio: "ignore" },
      ),
    );
    for (
      let i = 0;
      i < 100 &&
      !(await connectTcp(mitmPort)
        .then((s) => (s.destroy(), true))
        .catch(() => false));
      i++
    )
      await new Promise((r) => setTimeout(r, 100));
  }

  const at = (port: number, host = "127.0.0.1") => ({ host, port });
  const originReq = Buffer.from(`GET /v1/items HTTP/1.1\r\nHost: ${NAME}\r\nUser-Agent: bench\r\n\r\n`);
  const absReq = Buffer.from(`GET http://${NAME}/v1/items HTTP/1.1\r\nHost: ${NAME}\r\nUser-Agent: bench\r\n\r\n`);
  const tlsTo = (port: number, host: string, ca: string): NodeTarget => ({
    open: async () => startTls(await connectTcp(port, host), { servername: NAME, ca }),
    request: originReq,
  });
  const httpDirect: Contender = {
    name: "direct",
    wrk: { scheme: "http", connect: at(up.info.http, UP_ADDR), host: NAME, target: "/v1/items" },
    node: { open: () => connectTcp(up.info.http, UP_ADDR), request: originReq },
  };
  type Cpu = Contender["cpu"];
  const httpVia = (name: string, port: number, cpu?: Cpu): Contender => ({
    name,
    cpu,
    wrk: { scheme: "http", connect: at(port), host: NAME, target: `http://${NAME}/v1/items` },
    node: { open: () => connectTcp(port), request: absReq },
  });
  const httpsTo = (name: string, port: number, host: string, ca: string, cpu?: Cpu): Contender => ({
    name,
    cpu,
    wrk: { scheme: "https", connect: at(port, host), host: NAME, target: "/v1/items" },
    node: tlsTo(port, host, ca),
  });
  const h2To = (name: string, port: number, host: string, cpu?: Cpu): Contender => ({
    name,
    cpu,
    h2: { connect: at(port, host), host: H2_NAME, target: "/v1/items" },
  });
  const b = before;
  const httpRow = [
    httpDirect,
    httpVia("wharf egress", oursPort, cpuOf(ours)),
    ...(b ? [httpVia(beforeName, b.info.ports[0], cpuOf(b))] : []),
    httpVia("naive Node proxy", naive.info.port),
    ...(hasMitm ? [{ ...httpVia("mitmproxy", mitmPort) }] : []),
  ];
  const httpsRow = [
    httpsTo("direct", up.info.https, UP_ADDR, upCa.certPem),
    httpsTo("wharf egress", ours.info.transparent.https, "127.0.0.1", sandboxCa, cpuOf(ours)),
    ...(b ? [httpsTo(beforeName, b.info.transparent.https, "127.0.0.1", sandboxCa, cpuOf(b))] : []),
    httpsTo("naive Node proxy (tunnel only)", naive.info.pipes[`${NAME}:443`], "127.0.0.1", upCa.certPem),
  ];
  const h2Row = [
    h2To("direct", up.info.h2, UP_ADDR),
    h2To("wharf egress", ours.info.transparent.h2, "127.0.0.1", cpuOf(ours)),
    ...(b ? [h2To(beforeName, b.info.transparent.h2, "127.0.0.1", cpuOf(b))] : []),
    h2To("naive Node proxy (tunnel only)", naive.info.pipes[`${H2_NAME}:443`], "127.0.0.1"),
  ];
  const groups: Group[] = [
    { title: "HTTP keep-alive, 16 conns, header rule", conns: 16, contenders: httpRow },
    { title: "HTTP keep-alive, 1 conn, header rule", conns: 1, contenders: httpRow },
    { title: "HTTPS keep-alive inside interception, 16 conns", conns: 16, contenders: httpsRow },
    { title: "new intercepted TLS connection per request, 8 conns", conns: 8, close: true, contenders: httpsRow },
    { title: "HTTP/2 inside interception, 16 conns × 1 stream", conns: 16, streams: 1, contenders: h2Row },
    { title: "HTTP/2 inside interception, 16 conns × 10 streams", conns: 16, streams: 10, contenders: h2Row },
  ].filter((g) => !ONLY || g.title.includes(ONLY));

  // Sanity: the rule injects through interception (the upstream answers only 200s, so check the path works).
  {
    const s = await tlsTo(ours.info.transparent.https, "127.0.0.1", sandboxCa).open();
    s.write(originReq);
    await new Promise((r) => s.once("data", r));
    s.destroy();
  }

  const one = async (g: Group, c: Contender, seconds: number): Promise<Row | null> => {
    if (g.streams) return hasH2load && c.h2 ? h2load(c.name, c.h2, g.conns, g.streams, seconds) : null;
    if (hasWrk && c.wrk) return wrk(dir, c.name, { ...c.wrk, close: g.close }, g.conns, seconds);
    return c.node ? measureNode(c.name, c.node, g.conns, !!g.close, seconds) : null;
  };
  const results: Measured[] = [];
  for (const g of groups) {
    const m: Measured = { group: g, rows: new Map(), cpu: new Map(), upstreamCpu: NaN };
    const cpu = new Map<string, { plane: [number, number]; control: number; requests: number }>();
    const upCpu = { us: 0, requests: 0 };
    if (hasWrk && !g.streams) for (const c of g.contenders) await one(g, c, 1); // warm-up (JIT, pools); h2load warms itself
    for (let round = 0; round < ROUNDS; round++) {
      for (const c of g.contenders) {
        const p0 = c.cpu ? cpuMicros([c.cpu.plane]) : [0, 0];
        const c0 = c.cpu ? cpuMicros([c.cpu.control]) : [0, 0];
        const u0 = cpuMicros([up.child.pid!]);
        const r = await one(g, c, SECONDS);
        if (!r) continue;
        if (!m.rows.has(c.name)) m.rows.set(c.name, []);
        m.rows.get(c.name)!.push(r);
        if (c.cpu) {
          const p1 = cpuMicros([c.cpu.plane]);
          const c1 = cpuMicros([c.cpu.control]);
          const acc = cpu.get(c.name) ?? { plane: [0, 0], control: 0, requests: 0 };
          acc.plane[0] += p1[0] - p0[0];
          acc.plane[1] += p1[1] - p0[1];
          if (c.cpu.control !== c.cpu.plane) acc.control += c1[0] - c0[0] + c1[1] - c0[1];
          acc.requests += r.requests;
          cpu.set(c.name, acc);
        }
        if (c.name === "direct") {
          const u1 = cpuMicros([up.child.pid!]);
          upCpu.us += u1[0] - u0[0] + u1[1] - u0[1];
          upCpu.requests += r.requests;
        }
      }
    }
    // Requests counted by the generator cover its measured window; CPU covers the whole run (a
    // little warm-up and teardown), so these figures err high.
    for (const [name, a] of cpu)
      if (a.requests)
        m.cpu.set(name, { plane: [a.plane[0] / a.requests, a.plane[1] / a.requests], control: a.control / a.requests });
    m.upstreamCpu = upCpu.requests ? upCpu.us / upCpu.requests : NaN;
    results.push(m);
  }
  for (const c of children) c.kill("SIGTERM");
  const load1 = loadavg();

  // Memory: 100 sandboxes, then 1,000 and 2,000 open intercepted TLS connections (10 and 20 per
  // sandbox), no request yet. The first thousand can reuse memory the process freed while it
  // started; the second thousand's growth is what each further connection costs.
  const memory: string[] = [];
  const measureMemory = async (label: string, root: string, caFile: string) => {
    const mem = await spawnRole(["--role=ours", hosts, caFile, "100", LOCAL ? "local" : "supervised"], root);
    const ca2 = fs.readFileSync(path.join(path.dirname(caFile), "sandbox-ca.pem"), "utf8");
    const planePid: number = mem.info.dataPlanePid;
    await new Promise((r) => setTimeout(r, 500));
    const rss = () => [rssMiB(planePid), rssMiB(mem.child.pid!)];
    const idle = rss();
    const open: Stream[] = [];
    const openMore = async (n: number) => {
      for (let i = 0; i < n; i++)
        open.push(
          await startTls(await connectTunnel(mem.info.ports[open.length % 100], `${NAME}:443`), {
            servername: NAME,
            ca: ca2,
          }),
        );
      await new Promise((r) => setTimeout(r, 1000));
      return rss();
    };
    const first = await openMore(1000);
    const second = await openMore(1000);
    for (const s of open) s.destroy();
    mem.child.kill("SIGTERM");
    const per = (from: number[], to: number[], i: number) => (((to[i] - from[i]) * 1024) / 1000).toFixed(1);
    const where = planePid === mem.child.pid ? `${label} (one process)` : `${label}, data-plane child`;
    const control = planePid === mem.child.pid ? "" : `; control plane +${per(idle, second, 1)} KiB per connection`;
    memory.push(
      `memory, ${where}: 100 sandboxes idle ${idle[0].toFixed(1)} MiB RSS; 1,000 open intercepted TLS connections ${first[0].toFixed(1)} MiB (+${per(idle, first, 0)} KiB each), 2,000 ${second[0].toFixed(1)} MiB (the second thousand +${per(first, second, 0)} KiB each)${control}`,
    );
  };
  if (!ONLY || "memory".includes(ONLY)) {
    await measureMemory("wharf egress", process.cwd(), path.join(dir, "up-ca.pem"));
    if (BEFORE) await measureMemory(beforeName, path.join(dir, "before"), path.join(dir, "before", "up-ca.pem"));
  }
  fs.rmSync(dir, { recursive: true, force: true });

  // Report.
  const fmt = (n: number, d = 0) => (Number.isFinite(n) ? n.toFixed(d) : "-");
  const tools = [
    hasWrk
      ? "wrk (HTTP/1.1)"
      : "HTTP/1.1 rows by a Node client: wrk NOT INSTALLED (apt-get install wrk); the client is the bottleneck",
    hasH2load ? "h2load (HTTP/2)" : "HTTP/2 rows skipped: h2load NOT INSTALLED (apt-get install nghttp2-client)",
    hasMitm
      ? "mitmproxy (mitmdump, HTTP rows)"
      : "mitmproxy NOT INSTALLED (apt-get install mitmproxy), its rows skipped",
  ];
  console.log(
    `\nEgress proxy benchmark (${SECONDS} s per row, ${ROUNDS} round(s), Node ${process.version}, ${os.cpus().length} cores, load average ${load0} at start, ${load1} at end)`,
  );
  console.log(`load: ${tools.join("; ")}`);
  console.log(
    `our data plane: ${LOCAL ? "in the proxy's process (--local)" : "supervised child process accepting on the listeners the control plane handed it (as the platform runs it)"}; body ${Buffer.byteLength(BODY)} bytes\n`,
  );
  console.log(
    `| scenario | proxy | req/s | ${hasWrk ? "p50" : "median"} ms (h2: mean) | × direct${ROUNDS > 1 ? " (range)" : ""} | × naive | errors |`,
  );
  console.log("|---|---|---:|---:|---:|---:|---:|");
  for (const m of results) {
    const base = m.rows.get("direct") ?? [];
    const naiveRows = [...m.rows.entries()].find(([n]) => n.startsWith("naive"))?.[1] ?? [];
    for (const [name, rs] of m.rows) {
      const vsDirect = rs.map((r, i) => r.rps / (base[i]?.rps ?? NaN));
      const vsNaive = rs.map((r, i) => r.rps / (naiveRows[i]?.rps ?? NaN));
      const range =
        ROUNDS > 1 && name !== "direct" ? ` (${fmt(Math.min(...vsDirect), 2)}–${fmt(Math.max(...vsDirect), 2)})` : "";
      const naiveCol = name.startsWith("wharf") ? fmt(median(vsNaive), 2) : "";
      console.log(
        `| ${m.group.title} | ${name} | ${fmt(median(rs.map((r) => r.rps)))} | ${fmt(median(rs.map((r) => r.latency)), 2)} | ${fmt(median(vsDirect), 2)}${range} | ${naiveCol} | ${rs.reduce((a, r) => a + r.errors, 0)} |`,
      );
    }
  }
  console.log("");
  for (const m of results) {
    for (const [name, c] of m.cpu) {
      const total = c.plane[0] + c.plane[1] + c.control;
      console.log(
        `${m.group.title}: ${name} CPU per request ${fmt(total)} µs (data plane user ${fmt(c.plane[0])} + kernel ${fmt(c.plane[1])}, control plane ${fmt(c.control)}); the upstream server itself, direct: ${fmt(m.upstreamCpu)} µs`,
      );
    }
  }
  for (const line of memory) console.log(line);
  if (CHANGES.length) {
    console.log("\nWhat bought what (this benchmark before and after each change, same machine):");
    for (const c of CHANGES) console.log(`- ${c}`);
  }
}

if (ROLE) process.on("SIGTERM", () => process.exit(0));
const roleArgs = process.argv.slice(3);
if (ROLE === "upstream") await roleUpstream(roleArgs);
else if (ROLE === "ours") await roleOurs(roleArgs);
else if (ROLE === "naive") await roleNaive(roleArgs);
else await main();
