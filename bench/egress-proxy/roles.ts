/**
 * The processes of the egress benchmark, each started as `bench/egress-proxy.ts --role=…`: the
 * loopback upstream, our proxy (the control plane with its supervised data-plane child, as the
 * platform runs it) and the naive Node proxy it is compared with. Each prints one JSON line with
 * what the load generators need.
 */
import fs from "node:fs";
import http from "node:http";
import http2 from "node:http2";
import https from "node:https";
import net from "node:net";
import path from "node:path";

export const UP_ADDR = "127.0.0.2";
/** The HTTP/1.1 destination and the HTTP/2 one (its upstream speaks only h2). */
export const NAME = "api.bench";
export const H2_NAME = "h2.bench";
export const BODY = JSON.stringify({ ok: true, message: "hello from the upstream", n: 42 });

const listen = async (server: net.Server, host: string): Promise<number> => {
  await new Promise<void>((r) => server.listen(0, host, r));
  return (server.address() as net.AddressInfo).port;
};

export async function roleUpstream(args: string[]): Promise<void> {
  const [certFile, keyFile, h2CertFile] = args;
  const key = fs.readFileSync(keyFile);
  const handler = (_req: http.IncomingMessage, res: http.ServerResponse) => {
    res.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(BODY) });
    res.end(BODY);
  };
  const h = http.createServer({ keepAliveTimeout: 60_000 }, handler);
  const s = https.createServer({ cert: fs.readFileSync(certFile), key, keepAliveTimeout: 60_000 }, handler);
  const h2 = http2.createSecureServer({
    cert: fs.readFileSync(h2CertFile),
    key,
    settings: { maxConcurrentStreams: 256 },
  });
  h2.on("stream", (stream) => {
    stream.respond({ ":status": 200, "content-type": "application/json", "content-length": Buffer.byteLength(BODY) });
    stream.end(BODY);
  });
  h2.on("sessionError", () => {});
  console.log(
    JSON.stringify({ http: await listen(h, UP_ADDR), https: await listen(s, UP_ADDR), h2: await listen(h2, UP_ADDR) }),
  );
}

/**
 * Our proxy as the platform runs it: `SupervisedDataPlane` forks the data-plane child and hands it
 * the listeners, on which it accepts (this process keeps an unpolled copy). Sandbox 0 also gets
 * transparent listeners standing in for captured `NAME:443` and `H2_NAME:443` (what a sandbox's
 * `local default` route delivers). `local` runs the same data plane in this process instead.
 */
export async function roleOurs(args: string[]): Promise<void> {
  const [hosts, caFile, count, where] = [args[0], args[1], Number(args[2] ?? 1), args[3] ?? "supervised"];
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    WHARF_EGRESS_HOSTS: hosts,
    WHARF_EGRESS_ALLOW_INTERNAL: `${UP_ADDR}/32`,
    WHARF_EGRESS_UPSTREAM_CA_FILE: caFile,
    WHARF_EGRESS_SYSTEM_DNS: "0",
  };
  // Profile the data-plane child, not this process (BENCH_PROF=dir).
  const nodeArgs = process.env.BENCH_PROF ? ["--cpu-prof", `--cpu-prof-dir=${process.env.BENCH_PROF}`] : [];
  // Extra Node options for the child (BENCH_CHILD_ARGS="--max-semi-space-size=2"), to compare settings.
  if (process.env.BENCH_CHILD_ARGS) nodeArgs.push(...process.env.BENCH_CHILD_ARGS.split(" ").filter(Boolean));
  Object.assign(process.env, {
    WHARF_EGRESS_HOSTS: env.WHARF_EGRESS_HOSTS,
    WHARF_EGRESS_ALLOW_INTERNAL: env.WHARF_EGRESS_ALLOW_INTERNAL,
    WHARF_EGRESS_UPSTREAM_CA_FILE: caFile,
    WHARF_EGRESS_SYSTEM_DNS: "0",
  });
  const { SupervisedDataPlane } = await import("../../src/egress/supervisor/supervised-data-plane.ts");
  const { LocalDataPlane } = await import("../../src/egress/supervisor/data-plane.ts");
  const { loadEgressSettings } = await import("../../src/egress/egress-settings.ts");
  const { createCa } = await import("../../src/egress/proxy/certificates.ts");
  const { toStoredConfig, proxyConfigSchema } = await import("../../src/egress/config/proxy-config.ts");
  const audited = { n: 0 };
  const audit = { record: () => void audited.n++ };
  const plane =
    where === "local"
      ? new LocalDataPlane(loadEgressSettings(env), audit, () => null)
      : new SupervisedDataPlane(audit, null, env, process.env, nodeArgs);
  const ca = await createCa("bench sandbox CA");
  fs.writeFileSync(path.join(path.dirname(caFile), "sandbox-ca.pem"), ca.certPem);
  const cfg = await toStoredConfig(
    proxyConfigSchema.parse({
      rules: [
        {
          name: "other",
          match_hosts: ["other.bench", "*.other.bench"],
          headers: [{ name: "X-Other", type: "plaintext", value: "x" }],
        },
        {
          name: "bench",
          match_hosts: [NAME, H2_NAME],
          match_paths: ["/v1/*", "/"],
          headers: [{ name: "Authorization", type: "plaintext", value: "Bearer injected-by-proxy" }],
        },
      ],
    }),
    async () => "unused",
  );
  const serve = async (
    id: string,
    role: { kind: "explicit" } | { kind: "transparent"; host: string; port: number },
  ): Promise<number> => {
    const server = net.createServer();
    const port = await listen(server, "127.0.0.1");
    plane.addSelfEndpoint("127.0.0.1", port);
    plane.serveListener(id, port, server, role);
    return port;
  };
  const ports: number[] = [];
  let transparent: Record<string, number> = {};
  for (let i = 0; i < count; i++) {
    const id = `s${i}`;
    plane.upsertSandbox({ id, workspaceId: "w", ca, compiled: { cfg, secrets: [], sealed: [] } });
    ports.push(await serve(id, { kind: "explicit" }));
    if (i === 0)
      transparent = {
        https: await serve(id, { kind: "transparent", host: NAME, port: 443 }),
        h2: await serve(id, { kind: "transparent", host: H2_NAME, port: 443 }),
      };
  }
  if ("whenReady" in plane) await plane.whenReady();
  const dataPlanePid = "pid" in plane ? plane.pid : process.pid;
  console.log(JSON.stringify({ ports, transparent, dataPlanePid }));
}

/** The floor a naive Node forward proxy reaches: absolute-form via http.request, CONNECT and `pipes` as plain tunnels. */
export async function roleNaive(args: string[]): Promise<void> {
  const map: Record<string, { host: string; port: number }> = JSON.parse(args[0]);
  const agent = new http.Agent({ keepAlive: true, maxSockets: 256 });
  const server = http.createServer((req, res) => {
    const u = new URL(req.url!);
    const to = map[`${u.hostname}:${u.port || 80}`];
    const up = http.request(
      { host: to.host, port: to.port, method: req.method, path: u.pathname + u.search, headers: req.headers, agent },
      (r) => {
        res.writeHead(r.statusCode!, r.headers);
        r.pipe(res);
      },
    );
    up.on("error", () => res.destroy());
    req.pipe(up);
  });
  const pipe = (socket: net.Socket, to: { host: string; port: number }, head?: Buffer, reply?: string) => {
    const up = net.connect(to.port, to.host, () => {
      if (reply) socket.write(reply);
      if (head?.length) up.write(head);
      socket.pipe(up);
      up.pipe(socket);
    });
    up.on("error", () => socket.destroy());
    socket.on("error", () => up.destroy());
  };
  server.on("connect", (req, socket: net.Socket, head) =>
    pipe(socket, map[req.url!], head, "HTTP/1.1 200 Connection Established\r\n\r\n"),
  );
  const pipes: Record<string, number> = {};
  for (const key of [`${NAME}:443`, `${H2_NAME}:443`])
    pipes[key] = await listen(
      net.createServer({ noDelay: true }, (s) => pipe(s, map[key])),
      "127.0.0.1",
    );
  console.log(JSON.stringify({ port: await listen(server, "127.0.0.1"), pipes }));
}
