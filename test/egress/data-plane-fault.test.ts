/**
 * Fault containment: the egress data plane runs in its own supervised process. A crash injected
 * through the operator's fault hook costs only that process's connections; the control plane
 * (this process) keeps answering, and egress works again within a second for every sandbox.
 */
import assert from "node:assert/strict";
import crypto from "node:crypto";
import http from "node:http";
import net from "node:net";
import { test } from "node:test";
import { MemoryAudit } from "../../src/egress/audit/audit-log.ts";
import { proxyConfigSchema, toStoredConfig } from "../../src/egress/config/proxy-config.ts";
import { createCa } from "../../src/egress/proxy/certificates.ts";
import type { CompiledConfig } from "../../src/egress/supervisor/data-plane.ts";
import { SupervisedDataPlane } from "../../src/egress/supervisor/supervised-data-plane.ts";
import { restartDelay } from "../../src/egress/supervisor/restart-policy.ts";
import { hostsSetting, startUpstreams } from "./support/upstreams.ts";

const SECRET = "fault-secret-" + crypto.randomBytes(8).toString("hex");

async function compiled(config: unknown): Promise<CompiledConfig> {
  const sealed: Array<[string, string]> = [];
  const cfg = await toStoredConfig(proxyConfigSchema.parse(config), async (v) => {
    const id = `v${sealed.length}`;
    sealed.push([id, v]);
    return id;
  });
  return { cfg, secrets: [], sealed };
}

/** One plain-HTTP request through a sandbox's explicit proxy listener (a new connection each time). */
function viaProxy(port: number, headers: Record<string, string> = {}): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        host: "127.0.0.1",
        port,
        path: "http://api.test/fault",
        headers: { host: "api.test", ...headers },
        agent: false,
      },
      (res) => {
        let body = "";
        res.setEncoding("utf8");
        res.on("data", (d: string) => (body += d));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
        res.on("error", reject);
      },
    );
    req.setTimeout(5_000, () => req.destroy(new Error("timeout")));
    req.on("error", reject);
    req.end();
  });
}

test("the restart policy: at once for isolated crashes, backing off in a crash loop", () => {
  assert.deepEqual([1, 2, 3, 4, 5, 6, 12, 40].map(restartDelay), [0, 0, 0, 100, 200, 400, 5000, 5000]);
});

test("a crash in the data plane: the control plane answers throughout, egress is back within 1 s for every sandbox", async (t) => {
  const up = await startUpstreams(t, ["api.test"]);
  const audit = new MemoryAudit();
  const env = {
    ...process.env,
    WHARF_EGRESS_HOSTS: hostsSetting(up, ["api.test"]),
    WHARF_EGRESS_ALLOW_INTERNAL: `${up.address}/32`,
    WHARF_EGRESS_UPSTREAM_CA_FILE: up.caFile,
    WHARF_EGRESS_SYSTEM_DNS: "0",
    WHARF_EGRESS_FAULT_HOOK: "1",
  };
  const plane = new SupervisedDataPlane(audit, null, env);
  t.after(() => plane.close());
  const ca = await createCa("Wharf fault test CA");
  const config = {
    rules: [
      {
        name: "api",
        match_hosts: ["api.test"],
        headers: [{ name: "Authorization", type: "opaque", value: `Bearer ${SECRET}` }],
      },
    ],
  };
  const ports: Record<string, number> = {};
  for (const id of ["sb1", "sb2"]) {
    plane.upsertSandbox({ id, workspaceId: "ws1", ca, compiled: await compiled(config) });
    const server = net.createServer();
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    t.after(() => new Promise((r) => server.close(r)));
    ports[id] = (server.address() as net.AddressInfo).port;
    plane.serveListener(id, ports[id], server, { kind: "explicit" });
  }
  await plane.whenReady();
  const before = await viaProxy(ports.sb2);
  assert.equal(before.status, 200);
  assert.equal(JSON.parse(before.body).headers.authorization, `Bearer ${SECRET}`);

  // The control plane: a server in this process, asked every 20 ms while the data plane crashes.
  const control = http.createServer((_req, res) => res.end("ok"));
  await new Promise<void>((r) => control.listen(0, "127.0.0.1", r));
  t.after(() => new Promise((r) => (control.closeAllConnections(), control.close(r))));
  const controlPort = (control.address() as net.AddressInfo).port;
  let pings = 0;
  let pingFailures = 0;
  let polling = true;
  const poller = (async () => {
    while (polling) {
      const ok = await new Promise<boolean>((resolve) =>
        http
          .get(
            { host: "127.0.0.1", port: controlPort, agent: false, timeout: 2_000 },
            (res) => (res.resume(), res.on("end", () => resolve(res.statusCode === 200))),
          )
          .on("error", () => resolve(false)),
      );
      pings++;
      if (!ok) pingFailures++;
      await new Promise((r) => setTimeout(r, 20));
    }
  })();

  const servingPid = plane.pid;
  // The request that trips the hook loses its connection with the process: the crash has happened.
  await viaProxy(ports.sb1, { "x-wharf-egress-fault": "crash" }).then(
    (r) => assert.notEqual(r.status, 200),
    () => {},
  );
  const crashedAt = Date.now();
  // New connections of both sandboxes succeed again, the other sandbox's first.
  const backAt: Record<string, number> = {};
  for (const id of ["sb2", "sb1"]) {
    for (;;) {
      const r = await viaProxy(ports[id]).catch(() => null);
      if (r?.status === 200) {
        assert.equal(
          JSON.parse(r.body).headers.authorization,
          `Bearer ${SECRET}`,
          "rules and sealed values came back with the new process",
        );
        backAt[id] = Date.now() - crashedAt;
        break;
      }
      assert.ok(Date.now() - crashedAt < 10_000, "egress never came back");
      await new Promise((r) => setTimeout(r, 20));
    }
  }
  polling = false;
  await poller;
  assert.notEqual(plane.pid, servingPid, "a new process serves");
  assert.equal(plane.takeovers, 1);
  assert.ok(
    backAt.sb2 < 1000 && backAt.sb1 < 1000,
    `egress back within 1 s (sb2 ${backAt.sb2} ms, sb1 ${backAt.sb1} ms)`,
  );
  assert.ok(pings > 0 && pingFailures === 0, `the control plane answered every time (${pings} pings)`);
  // Audit events travel back from the child.
  await new Promise((r) => setTimeout(r, 100));
  assert.ok(audit.events.some((e) => e.kind === "inject" && e.sandboxId === "sb1"));
  assert.ok(!JSON.stringify(audit.events).includes(SECRET));
});

/** Whether a TCP connect to the port is refused (nothing listens) rather than accepted or left waiting. */
function refused(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = net.connect(port, "127.0.0.1");
    s.once("connect", () => (s.destroy(), resolve(false)));
    s.once("error", (err: NodeJS.ErrnoException) => resolve(err.code === "ECONNREFUSED"));
  });
}

test("the serving child accepts on the listeners itself; connections made while no child serves wait and are served by the next; a closed listener refuses", async (t) => {
  const up = await startUpstreams(t, ["api.test"]);
  const env = {
    ...process.env,
    WHARF_EGRESS_HOSTS: hostsSetting(up, ["api.test"]),
    WHARF_EGRESS_ALLOW_INTERNAL: `${up.address}/32`,
    WHARF_EGRESS_UPSTREAM_CA_FILE: up.caFile,
    WHARF_EGRESS_SYSTEM_DNS: "0",
  };
  const plane = new SupervisedDataPlane(new MemoryAudit(), null, env);
  t.after(() => plane.close());
  const ca = await createCa("Wharf listener test CA");
  const config = {
    rules: [
      {
        name: "api",
        match_hosts: ["api.test"],
        headers: [{ name: "Authorization", type: "opaque", value: `Bearer ${SECRET}` }],
      },
    ],
  };
  const servers: Record<string, net.Server> = {};
  const ports: Record<string, number> = {};
  for (const id of ["sb1", "sb2"]) {
    plane.upsertSandbox({ id, workspaceId: "ws1", ca, compiled: await compiled(config) });
    const server = net.createServer();
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    t.after(() => new Promise((r) => server.close(() => r(undefined))));
    servers[id] = server;
    ports[id] = (server.address() as net.AddressInfo).port;
    plane.serveListener(id, ports[id], server, { kind: "explicit" });
  }
  await plane.whenReady();
  // Once the child accepts, nothing more goes through this process.
  for (let i = 0; i < 250 && plane.heldListeners < 2; i++) await new Promise((r) => setTimeout(r, 20));
  assert.equal(plane.heldListeners, 2, "the child took both listeners over");
  const passedBefore = plane.passed;
  const first = await Promise.all(Array.from({ length: 20 }, (_, i) => viaProxy(ports[i % 2 ? "sb1" : "sb2"])));
  assert.ok(first.every((r) => r.status === 200 && JSON.parse(r.body).headers.authorization === `Bearer ${SECRET}`));
  assert.equal(plane.passed, passedBefore, "the control plane accepted none of them");
  assert.ok(servers.sb1.listening, "the caller's server still stands for the listener");

  // No child serves for a moment: connections wait in the kernel's queue and the next child takes them.
  const pid = plane.pid!;
  process.kill(pid, "SIGKILL");
  const during = await Promise.all(
    Array.from({ length: 20 }, (_, i) =>
      viaProxy(ports[i % 2 ? "sb1" : "sb2"]).catch((err: Error) => ({ status: 0, body: err.message })),
    ),
  );
  assert.deepEqual(
    during.map((r) => r.status),
    Array(20).fill(200),
    "every connection made across the crash was served",
  );
  assert.notEqual(plane.pid, pid);

  // A listener the caller stops serving refuses connections once closed (no child keeps it open).
  plane.closeListener("sb1", ports.sb1);
  servers.sb1.close();
  let gone = false;
  for (let i = 0; i < 50 && !gone; i++)
    gone = (await refused(ports.sb1)) || (await new Promise((r) => setTimeout(r, 20)), false);
  assert.ok(gone, "the closed listener refuses connections");
  // So does a removed sandbox's.
  plane.removeSandbox("sb2");
  servers.sb2.close();
  gone = false;
  for (let i = 0; i < 50 && !gone; i++)
    gone = (await refused(ports.sb2)) || (await new Promise((r) => setTimeout(r, 20)), false);
  assert.ok(gone, "a removed sandbox's listener refuses connections");
});
