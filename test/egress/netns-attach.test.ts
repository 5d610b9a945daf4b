import assert from "node:assert/strict";
import crypto from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import { after, before, describe, test, type TestContext } from "node:test";
import { keyringFromEnv } from "../../src/crypto/keyring.ts";
import { SecretBox } from "../../src/crypto/secret-box.ts";
import { attachEgress, type EgressAttachment } from "../../src/egress/attach.ts";
import { loadEgressSettings } from "../../src/egress/egress-settings.ts";
import { EgressRuntime, setEgressRuntime } from "../../src/egress/egress-runtime.ts";
import { prepareProxyConfig, proxyConfigSchema } from "../../src/egress/config/proxy-config.ts";
import { SANDBOX_CA_BUNDLE, SANDBOX_CA_FILE } from "../../src/egress/capture/sandbox-egress.ts";
import { bootstrap } from "../../src/platform/bootstrap.ts";
import { deleteSecret, upsertSecrets } from "../../src/secrets/secret-store.ts";
import { openTestStore } from "../support/dialects.ts";
import { requireCapability } from "../support/requirements.ts";
import { createNetns, netnsAvailable, type TestNetns } from "./support/netns.ts";
import { hostsSetting, startUpstreams, type Upstreams } from "./support/upstreams.ts";

const SECRET = "ghp_" + crypto.randomBytes(16).toString("hex");
const available = await netnsAvailable();

/**
 * attachEgress against a bare network namespace (what the sandbox driver creates: loopback only),
 * with real clients run inside it. Files the sandbox would get are placed where the namespace sees
 * them: resolv.conf through /etc/netns, the CA files at temporary paths the environment points to.
 */
describe("attachEgress on a real network namespace", () => {
  const cleanups: Array<() => unknown> = [];
  const suite = { after: (fn: () => unknown) => cleanups.push(fn) } as unknown as TestContext;
  let up: Upstreams;
  let ns: TestNetns;
  let att: EgressAttachment;
  let rt: EgressRuntime;
  let env: Record<string, string>;
  let prepare: (cfg: unknown) => Promise<Record<string, unknown>>;
  let dir: string;
  let secrets: { upsert(key: string, value: string): Promise<unknown>; remove(key: string): Promise<unknown> };

  const config = {
    rules: [
      {
        name: "gh",
        match_hosts: ["api.test"],
        match_paths: ["/v1/*"],
        headers: [{ name: "Authorization", type: "workspace_secret", value: "token {GH_TOKEN}" }],
      },
      {
        name: "other",
        match_hosts: ["other.test"],
        headers: [{ name: "X-Key", type: "opaque", value: "opaque-" + SECRET }],
      },
    ],
    access_control: { allow_list: ["api.test", "other.test", "ws.test", "tcp.test:5432", "raw.test:8443"] },
  };

  before(async () => {
    if (!available) return;
    up = await startUpstreams(suite);
    const s = (await openTestStore(suite as TestContext, "sqlite"))!;
    cleanups.push(() => s.cleanup());
    const boot = await bootstrap(s.store.db, s.home);
    const box = new SecretBox(keyringFromEnv(crypto.randomBytes(32).toString("base64")));
    await upsertSecrets(s.store.db, box, boot.workspaceId, [{ key: "GH_TOKEN", value: SECRET }]);
    secrets = {
      upsert: (key, value) => upsertSecrets(s.store.db, box, boot.workspaceId, [{ key, value }]),
      remove: (key) => deleteSecret(s.store.db, boot.workspaceId, key),
    };
    const settings = loadEgressSettings({
      WHARF_EGRESS_HOSTS: hostsSetting(up),
      WHARF_EGRESS_ALLOW_INTERNAL: `${up.address}/32`,
      WHARF_EGRESS_UPSTREAM_CA_FILE: up.caFile,
      WHARF_EGRESS_SYSTEM_DNS: "0",
    });
    rt = new EgressRuntime({ db: s.store.db, box, log: null, source: {}, settings });
    setEgressRuntime(rt);
    cleanups.push(() => rt.close());
    prepare = (cfg) => prepareProxyConfig({ db: s.store.db, box }, boot.workspaceId, proxyConfigSchema.parse(cfg));
    ns = await createNetns(suite as TestContext);
    const t0 = performance.now();
    att = await attachEgress({
      sandboxId: "sbx-1",
      workspaceId: boot.workspaceId,
      netnsPid: ns.pid,
      proxyConfig: await prepare(config),
    });
    console.log(`attachEgress took ${(performance.now() - t0).toFixed(0)} ms`);
    cleanups.push(() => att.detach());
    dir = fs.mkdtempSync(path.join(up.dir, "sbx-files-"));
    env = { ...att.env, PATH: process.env.PATH ?? "/usr/bin:/bin", HOME: "/root" };
    fs.writeFileSync(path.join(dir, "ca.crt"), att.files[SANDBOX_CA_FILE]);
    fs.writeFileSync(path.join(dir, "bundle.crt"), att.files[SANDBOX_CA_BUNDLE]);
    for (const [k, v] of Object.entries(env)) {
      if (v === SANDBOX_CA_FILE) env[k] = path.join(dir, "ca.crt");
      if (v === SANDBOX_CA_BUNDLE) env[k] = path.join(dir, "bundle.crt");
    }
    ns.setResolvConf(att.files["/etc/resolv.conf"]);
  });
  after(async () => {
    for (const fn of cleanups.reverse()) await fn();
    setEgressRuntime(null);
  });

  test("env and files: proxy variables, every CA variable, the CA in the bundle, the DNS stub", (t) => {
    if (!requireCapability(t, available, "needs root and network namespaces (ip netns, nsenter)")) return;
    for (const k of [
      "HTTP_PROXY",
      "HTTPS_PROXY",
      "http_proxy",
      "https_proxy",
      "NO_PROXY",
      "SSL_CERT_FILE",
      "NODE_EXTRA_CA_CERTS",
      "REQUESTS_CA_BUNDLE",
      "CURL_CA_BUNDLE",
      "AWS_CA_BUNDLE",
      "GRPC_DEFAULT_SSL_ROOTS_FILE_PATH",
    ])
      assert.ok(att.env[k], k);
    assert.equal(att.env.HTTPS_PROXY, "http://127.0.0.1:3128");
    assert.equal(att.env.NODE_EXTRA_CA_CERTS, SANDBOX_CA_FILE);
    assert.ok(att.files[SANDBOX_CA_BUNDLE].endsWith(att.files[SANDBOX_CA_FILE]));
    assert.ok(att.files[SANDBOX_CA_BUNDLE].length > att.files[SANDBOX_CA_FILE].length * 10, "system roots kept");
    const all = JSON.stringify({ env: att.env, files: att.files });
    assert.ok(!all.includes(SECRET), "no credential in the sandbox's environment or files");
  });

  test("curl through HTTPS_PROXY and by transparent capture (no proxy) both get the injected header", async (t) => {
    if (!requireCapability(t, available, "needs root and network namespaces")) return;
    let r = await ns.exec(["curl", "-sS", "--max-time", "10", "https://api.test/v1/user"], env);
    assert.equal(r.stderr, "");
    assert.equal(JSON.parse(r.stdout).headers.authorization, `token ${SECRET}`);
    r = await ns.exec(["curl", "-sS", "--max-time", "10", "--noproxy", "*", "https://api.test/v1/transparent"], env);
    assert.equal(r.stderr, "");
    assert.equal(JSON.parse(r.stdout).headers.authorization, `token ${SECRET}`);
    r = await ns.exec(["curl", "-sS", "--max-time", "10", "--noproxy", "*", "http://other.test/plain"], env);
    assert.equal(JSON.parse(r.stdout).headers["x-key"], "opaque-" + SECRET);
    r = await ns.exec(["curl", "-sS", "--max-time", "10", "https://api.test/v2/no-rule"], env);
    assert.equal(JSON.parse(r.stdout).headers.authorization, undefined, "match_paths");
  });

  test("python3 urllib and Node fetch trust the CA from the environment alone", async (t) => {
    if (!requireCapability(t, available, "needs root and network namespaces")) return;
    const py =
      "import urllib.request,json;print(json.loads(urllib.request.urlopen('https://api.test/v1/py',timeout=10).read())['headers'].get('authorization'))";
    let r = await ns.exec(["python3", "-c", py], env);
    assert.equal(r.stdout.trim(), `token ${SECRET}`, r.stderr);
    // Node 20's fetch ignores HTTP(S)_PROXY: this goes through transparent capture and the DNS stub.
    const js =
      "fetch('https://api.test/v1/node').then(r=>r.json()).then(j=>console.log(j.headers.authorization)).catch(e=>{console.error(e.cause??e);process.exit(1)})";
    r = await ns.exec([process.execPath, "-e", js], env);
    assert.equal(r.stdout.trim(), `token ${SECRET}`, r.stderr);
  });

  test("raw TCP: allow-listed host:PORT passes end to end (upstream's own TLS); other ports and UDP go nowhere", async (t) => {
    if (!requireCapability(t, available, "needs root and network namespaces")) return;
    const py = `
import socket, ssl, json
out = {}
s = socket.create_connection(("tcp.test", 5432), timeout=5); s.sendall(b"ping"); out["tcp"] = s.recv(100).decode()
ctx = ssl.create_default_context(cafile=${JSON.stringify(up.caFile)})
t = ctx.wrap_socket(socket.create_connection(("raw.test", 8443), timeout=5), server_hostname="raw.test")
out["tls_issuer"] = dict(x[0] for x in t.getpeercert()["issuer"]).get("commonName"); t.sendall(b"hi"); out["tls"] = t.recv(100).decode()
for port in (22, 6379, 853, 5433):
    try:
        socket.create_connection(("tcp.test", port), timeout=3); out[str(port)] = "open"
    except Exception as e: out[str(port)] = type(e).__name__
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); u.settimeout(1)
try:
    u.sendto(b"quic", ("203.0.113.7", 443)); u.recvfrom(100); out["udp443"] = "answered"
except Exception as e: out["udp443"] = type(e).__name__
try:
    s = socket.create_connection(("127.0.0.1", 443), timeout=3); s.sendall(b"GET / HTTP/1.1\\r\\nHost: 127.0.0.1\\r\\n\\r\\n"); out["loopback443"] = "closed" if s.recv(10) == b"" else "answered"
except Exception as e: out["loopback443"] = type(e).__name__
print(json.dumps(out))`;
    const r = await ns.exec(["python3", "-c", py], env);
    const out = JSON.parse(r.stdout || "{}");
    assert.equal(out.tcp, "tcp-echo:ping", r.stderr);
    assert.equal(out.tls_issuer, "Wharf test upstream CA", "the sandbox sees the upstream's own certificate");
    assert.equal(out.tls, "tls-echo:hi");
    for (const port of ["22", "6379", "853", "5433"]) assert.equal(out[port], "ConnectionRefusedError", `port ${port}`);
    assert.notEqual(out.udp443, "answered");
    assert.ok(
      ["closed", "ConnectionResetError", "BrokenPipeError"].includes(out.loopback443),
      `the sandbox's own loopback is never forwarded: ${out.loopback443}`,
    );
  });

  test("names not allow-listed and internal addresses are blocked; DNS answers only fake addresses", async (t) => {
    if (!requireCapability(t, available, "needs root and network namespaces")) return;
    let r = await ns.exec(
      ["curl", "-sS", "--max-time", "10", "-o", "/dev/null", "-w", "%{http_code}", "https://blocked.test/"],
      env,
    );
    assert.equal(r.stdout, "403");
    r = await ns.exec(
      [
        "curl",
        "-sS",
        "--max-time",
        "10",
        "--noproxy",
        "*",
        "-o",
        "/dev/null",
        "-w",
        "%{http_code}",
        "http://169.254.169.254/latest/meta-data/",
      ],
      env,
    );
    assert.equal(r.stdout, "403");
    r = await ns.exec(
      [
        "python3",
        "-c",
        "import socket;print(socket.gethostbyname('anything.example.com'));print(socket.getaddrinfo('api.test',443,socket.AF_INET6) if False else '')",
      ],
      env,
    );
    assert.match(r.stdout, /^198\.1[89]\./);
  });

  test("live update: new rules at once, a new raw port opened, nothing restarted", async (t) => {
    if (!requireCapability(t, available, "needs root and network namespaces")) return;
    const next = {
      rules: [
        {
          name: "gh2",
          match_hosts: ["api.test"],
          headers: [{ name: "Authorization", type: "plaintext", value: "token rotated" }],
        },
      ],
      access_control: { allow_list: ["api.test", "tcp.test:5432", "tcp.test:6000"] },
    };
    await att.update(await prepare(next));
    const r = await ns.exec(["curl", "-sS", "--max-time", "10", "https://api.test/v2/any"], env);
    assert.equal(JSON.parse(r.stdout).headers.authorization, "token rotated");
    // tcp.test:6000 now has a listener in the namespace (the proxy then finds no upstream mapping: refused upstream).
    const py =
      "import socket\ntry:\n  s=socket.create_connection(('tcp.test',6000),timeout=3);print('accepted')\nexcept Exception as e: print(type(e).__name__)";
    const p = await ns.exec(["python3", "-c", py], env);
    assert.equal(p.stdout.trim(), "accepted");
    const blocked = await ns.exec(
      ["curl", "-sS", "--max-time", "10", "-o", "/dev/null", "-w", "%{http_code}", "https://other.test/"],
      env,
    );
    assert.equal(blocked.stdout, "403", "other.test was removed from the allow_list");
    await att.update(await prepare(config));
  });

  test("a workspace secret written or deleted reaches the running sandbox within 1 s; deleted fails closed (502, audited)", async (t) => {
    if (!requireCapability(t, available, "needs root and network namespaces")) return;
    const auth = async () => {
      const r = await ns.exec(
        ["curl", "-sS", "--max-time", "10", "-w", "\n%{http_code}", "https://api.test/v1/rotate"],
        env,
      );
      const i = r.stdout.lastIndexOf("\n");
      const body = r.stdout.slice(0, i);
      return {
        status: Number(r.stdout.slice(i + 1)),
        body,
        authorization: body.startsWith("{")
          ? (JSON.parse(body).headers.authorization as string | undefined)
          : undefined,
      };
    };
    /** Polls until `ok`; how long the change took to reach the proxy. */
    const within = async (ok: (r: Awaited<ReturnType<typeof auth>>) => boolean) => {
      const t0 = Date.now();
      for (;;) {
        if (ok(await auth())) return Date.now() - t0;
        assert.ok(Date.now() - t0 < 5_000, "the change never reached the running sandbox");
      }
    };
    assert.equal((await auth()).authorization, `token ${SECRET}`);
    await secrets.upsert("GH_TOKEN", `${SECRET}-rotated`);
    const rotated = await within((r) => r.authorization === `token ${SECRET}-rotated`);
    await secrets.remove("GH_TOKEN");
    const removed = await within((r) => r.status === 502);
    const r = await auth();
    assert.equal(r.status, 502);
    assert.match(r.body, /credential for rule gh is unavailable/);
    assert.ok(rotated < 1000 && removed < 1000, `rotated in ${rotated} ms, deleted in ${removed} ms`);
    await rt.audit.flush();
    const rows = await rt.deps.db
      .selectFrom("egress_audit_log")
      .selectAll()
      .where("sandbox_id", "=", "sbx-1")
      .where("kind", "=", "credential")
      .execute();
    assert.ok(rows.some((row) => row.rule === "gh" && row.decision === "failed"));
    await secrets.upsert("GH_TOKEN", SECRET);
    await within((x) => x.authorization === `token ${SECRET}`);
  });

  test("audit rows reach the database, without values", async (t) => {
    if (!requireCapability(t, available, "needs root and network namespaces")) return;
    await rt.audit.flush();
    const rows = await rt.deps.db
      .selectFrom("egress_audit_log")
      .selectAll()
      .where("sandbox_id", "=", "sbx-1")
      .execute();
    assert.ok(rows.some((r) => r.kind === "inject" && r.rule === "gh"));
    assert.ok(rows.some((r) => r.kind === "block"));
    assert.ok(rows.some((r) => r.kind === "tunnel" && r.port === 5432));
    assert.ok(!JSON.stringify(rows).includes(SECRET));
  });
});
