import assert from "node:assert/strict";
import crypto from "node:crypto";
import path from "node:path";
import { test } from "node:test";
import { build } from "esbuild";
import { startSandboxPlatform } from "../sandboxes/support.ts";
import { isRoot, requireCapability } from "../support/requirements.ts";
import { startGrpcUpstream } from "./fixtures/grpc-upstream.ts";
import { startUpstreams, useUpstreamsForEgress } from "./support/upstreams.ts";

const SECRET = "grpc_" + crypto.randomBytes(16).toString("hex");
const OPAQUE = "opq_" + crypto.randomBytes(16).toString("hex");

interface Outcome {
  ok: boolean;
  value?: any;
  code?: number;
  status?: string;
  details?: string;
}

/**
 * gRPC from inside a real sandbox: the unmodified @grpc/grpc-js client (bundled, uploaded through
 * the files API, run by the base image's node) reaches a TLS gRPC server on the host's loopback
 * through the egress proxy's interception, explicitly (grpc-js reads `https_proxy`) and by
 * transparent capture, trusting the egress CA from the sandbox's environment alone. The header rule
 * injects the credential as metadata; the sandbox never holds it; a deny-listed host is refused
 * with PERMISSION_DENIED and never reached.
 */
test("gRPC from inside a sandbox: unary + server streaming with the credential injected, CA from the environment, deny_list refused", async (t) => {
  if (!requireCapability(t, process.platform === "linux" && isRoot(), "sandboxes need root on Linux")) return;
  const up = await startUpstreams(t, ["api.test"]);
  const grpcUp = await startGrpcUpstream(t, up, ["grpc.test", "denied-grpc.test"]);
  // Operator settings: both test names resolve to the loopback gRPC server; only the policy tells them apart.
  const hosts = [
    `grpc.test:443=${up.address}:${grpcUp.port}`,
    `denied-grpc.test:443=${up.address}:${grpcUp.port}`,
  ].join(",");
  useUpstreamsForEgress(up, { hosts });
  const bundle = build({
    entryPoints: [path.join(import.meta.dirname, "fixtures/grpc-in-sandbox.ts")],
    bundle: true,
    platform: "node",
    format: "cjs",
    write: false,
    logLevel: "silent",
    external: ["@grpc/proto-loader"],
  });
  const p = await startSandboxPlatform(t);
  if (!p) return;
  const res = await p.api("/v2/secrets", { method: "PUT", json: [{ key: "GRPC_TOKEN", value: SECRET }] });
  assert.equal(res.status, 200);
  const proxy_config = {
    // The rule names the denied host too: access control must win over injection.
    rules: [
      {
        name: "grpc",
        match_hosts: ["grpc.test", "denied-grpc.test"],
        headers: [
          { name: "authorization", type: "workspace_secret", value: "Bearer {GRPC_TOKEN}" },
          { name: "x-api-key", type: "opaque", value: OPAQUE },
        ],
      },
    ],
    access_control: { deny_list: ["denied-grpc.test"] },
  };
  const sbx = await p.create({ name: "grpc-e2e", proxy_config, wait_for_ready: true });
  const sh = async (cmd: string) => {
    const r = await p.exec(sbx, cmd, { timeout: 40 });
    assert.equal(r.status, 200, JSON.stringify(r.body));
    return r.body as { stdout: string; stderr: string; exit_code: number };
  };
  const form = new FormData();
  form.append("file", new Blob([Buffer.from((await bundle).outputFiles[0].contents)]), "grpc.cjs");
  const upload = await fetch(`${sbx.dataplane_url}/upload?path=/tmp/grpc.cjs`, {
    method: "POST",
    headers: { "x-api-key": p.apiKey },
    body: form,
  });
  assert.equal(upload.status, 200, await upload.clone().text());

  // The data plane's process starts with the first sandbox: on a loaded machine that can take
  // longer than one client's timeout, so wait for it once (any answer from the proxy will do).
  const warm = await p.exec(sbx, "curl -s --max-time 55 -o /dev/null -w '%{http_code}' http://warmup.test/", {
    timeout: 60,
  });
  assert.match(String(warm.body?.stdout), /^[1-5]\d\d$/, `the egress proxy answers: ${JSON.stringify(warm.body)}`);
  const outputs: string[] = [];
  const grpcRun = async (args: string, env = "") => {
    const r = await sh(`${env} node /tmp/grpc.cjs ${args}`);
    outputs.push(r.stdout, r.stderr);
    assert.equal(r.exit_code, 0, r.stderr);
    return JSON.parse(r.stdout) as { unary: Outcome; stream: Outcome; sent: string[] };
  };
  const expectInjected = (what: string, out: { unary: Outcome; stream: Outcome; sent: string[] }, from: number) => {
    assert.ok(out.unary.ok, `${what}: ${JSON.stringify(out.unary)}`);
    assert.equal(out.unary.value.text, "hello from the sandbox");
    assert.equal(out.unary.value.authority, "grpc.test", `${what}: :authority reaches the server as the verified host`);
    assert.ok(out.stream.ok, `${what}: ${JSON.stringify(out.stream)}`);
    assert.deepEqual(
      out.stream.value,
      [0, 1, 2, 3, 4],
      `${what}: the server stream arrives whole, ended by its grpc-status trailer`,
    );
    assert.deepEqual(out.sent, ["Bearer placeholder-inside-the-sandbox"], "the client only ever had its placeholder");
    const calls = grpcUp.calls.slice(from);
    assert.deepEqual(
      calls.map((c) => c.method),
      ["Echo", "Count"],
      what,
    );
    for (const c of calls) {
      assert.equal(c.authority, "grpc.test");
      assert.deepEqual(
        c.metadata.authorization,
        [`Bearer ${SECRET}`],
        `${what}: the rule's value replaced the client's, once`,
      );
      assert.deepEqual(c.metadata["x-api-key"], [OPAQUE], what);
    }
  };

  // (1) Through HTTPS_PROXY (CONNECT), roots from GRPC_DEFAULT_SSL_ROOTS_FILE_PATH (the CA bundle).
  let from = grpcUp.calls.length;
  expectInjected("explicit proxy", await grpcRun("grpc.test:443"), from);
  // (2) Proxy settings ignored: the stub's fake address, captured transparently.
  from = grpcUp.calls.length;
  expectInjected("transparent capture", await grpcRun("grpc.test capture"), from);
  // (3) NODE_EXTRA_CA_CERTS alone is enough too; with neither, the client cannot trust the proxy.
  from = grpcUp.calls.length;
  expectInjected(
    "NODE_EXTRA_CA_CERTS only",
    await grpcRun("grpc.test:443", "env -u GRPC_DEFAULT_SSL_ROOTS_FILE_PATH"),
    from,
  );
  from = grpcUp.calls.length;
  const untrusted = await grpcRun("grpc.test:443", "env -u GRPC_DEFAULT_SSL_ROOTS_FILE_PATH -u NODE_EXTRA_CA_CERTS");
  assert.equal(untrusted.unary.status, "UNAVAILABLE", JSON.stringify(untrusted.unary));
  assert.match(untrusted.unary.details ?? "", /certificate|self.signed|issuer/i);
  assert.equal(grpcUp.calls.length, from, "nothing reached the server without trust");

  // (4) A deny-listed gRPC host: PERMISSION_DENIED (HTTP 403 from the proxy), the server never called.
  for (const mode of ["", "capture"]) {
    const denied = await grpcRun(`denied-grpc.test:443 ${mode}`);
    for (const o of [denied.unary, denied.stream]) {
      assert.equal(o.status, "PERMISSION_DENIED", `${mode || "explicit"}: ${JSON.stringify(o)}`);
      assert.match(o.details ?? "", /403/);
    }
  }
  assert.ok(
    !grpcUp.calls.some((c) => c.authority.startsWith("denied-grpc.test")),
    "a denied host is never dialled, its rule never applied",
  );

  // No credential in the sandbox (environment, files) nor in anything the client printed.
  const scan = await sh(
    `env; grep -rIlF -e '${SECRET}' -e '${OPAQUE}' /etc /root /home /tmp /usr/local /workspace 2>/dev/null; true`,
  );
  for (const text of [scan.stdout, ...outputs])
    assert.ok(!text.includes(SECRET) && !text.includes(OPAQUE), "no credential inside the sandbox");
  assert.match(scan.stdout, /GRPC_DEFAULT_SSL_ROOTS_FILE_PATH=\/etc\/ssl\/certs\/ca-certificates\.crt/);

  const log = await (await p.api("/v2/sandboxes/boxes/grpc-e2e/egress-log?limit=200")).json();
  const entries = log.entries as Array<{ kind: string; rule?: string; host: string; path?: string; reason?: string }>;
  assert.ok(
    entries.some(
      (e) => e.kind === "inject" && e.rule === "grpc" && e.host === "grpc.test" && e.path === "/wharf.Test/Echo",
    ),
    JSON.stringify(entries.slice(0, 5)),
  );
  assert.ok(
    entries.some((e) => e.kind === "block" && e.host === "denied-grpc.test" && /deny_list/.test(e.reason ?? "")),
  );
  assert.ok(!entries.some((e) => e.kind === "inject" && e.host === "denied-grpc.test"));
  assert.ok(!JSON.stringify(log).includes(SECRET) && !JSON.stringify(log).includes(OPAQUE));
  assert.ok(!p.logs().includes(SECRET) && !p.logs().includes(OPAQUE), "no credential in the platform's logs");
});
