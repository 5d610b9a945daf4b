import assert from "node:assert/strict";
import fs from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { describe, test } from "node:test";
import WebSocket from "ws";
import { createApiKey } from "../../src/identity/api-keys.ts";
import { createUser, createWorkspace } from "../../src/identity/workspaces.ts";
import { startSandboxPlatform } from "./support.ts";

/**
 * Isolation, checked from inside real sandboxes with the tools an agent would use (bash, curl,
 * python3). Network checks only ever dial loopback: a listener this test opens on the host.
 */
describe("sandbox isolation (from inside)", () => {
  test("no network but its own loopback; host processes and files invisible; base image read-only", async (t) => {
    const p = await startSandboxPlatform(t);
    if (!p) return;
    let hostConnections = 0;
    const listener = net.createServer((s) => {
      hostConnections++;
      s.end("HOST\n");
    });
    await new Promise<void>((r) => listener.listen(0, "127.0.0.1", () => r()));
    const listener6 = net.createServer((s) => {
      hostConnections++;
      s.end("HOST\n");
    });
    await new Promise<void>((r) => listener6.listen((listener.address() as net.AddressInfo).port, "::1", () => r()));
    t.after(() => {
      listener.close();
      listener6.close();
    });
    const port = (listener.address() as net.AddressInfo).port;
    const secretFile = path.join(os.tmpdir(), `wharf-host-secret-${process.pid}`);
    fs.writeFileSync(secretFile, "host secret");
    t.after(() => fs.rmSync(secretFile, { force: true }));

    const box = await p.create({ name: "iso" });
    const r = await p.exec(
      box,
      [
        `curl -sS -m 3 http://127.0.0.1:${port}/ >/dev/null 2>&1 && echo curl4:reached || echo curl4:blocked`,
        `curl -sS -m 3 -g http://[::1]:${port}/ >/dev/null 2>&1 && echo curl6:reached || echo curl6:blocked`,
        `python3 - <<'EOF'
import socket, time
t = time.time()
for fam, addr in ((socket.AF_INET, ("127.0.0.1", ${port})), (socket.AF_INET6, ("::1", ${port}))):
    s = socket.socket(fam)
    s.settimeout(3)
    print("py", fam.name, s.connect_ex(addr) != 0)
print("fast", time.time() - t < 1)
EOF`,
        "echo ifaces:$(tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' ' | tr '\\n' ',')",
        "echo routes:$(tail -n +2 /proc/net/route | wc -l)",
        `test -e ${secretFile} && echo hostfile:visible || echo hostfile:hidden`,
        "ls /root 2>/dev/null | head -1; echo root-listing-done",
        "echo procs:$(ps -e --no-headers | wc -l)",
        `test -e /proc/${process.pid} && echo hostpid:visible || echo hostpid:hidden`,
        "touch /usr/bin/wharf-pwn 2>/dev/null && echo base:writable || echo base:readonly",
        "echo x >> /etc/passwd 2>/dev/null && echo etc:writable || echo etc:readonly",
        "rm -f /usr/bin/python3 2>/dev/null; test -e /usr/bin/python3 && echo python:intact || echo python:removed",
        // `/` takes new top-level folders (root can on LangSmith) but, sticky as /tmp, keeps the base's.
        "mkdir -p /wharf-new/sub 2>/dev/null && echo rootdir:creatable || echo rootdir:denied",
        "mv /etc /etc-moved 2>/dev/null && echo etc:moved || echo etc:kept",
        "rmdir /opt 2>/dev/null; test -d /opt && echo opt:kept || echo opt:removed",
        "unshare -r true 2>/dev/null && echo userns:allowed || echo userns:denied",
        "grep -E '^(Seccomp|NoNewPrivs|CapEff):' /proc/self/status | tr -s '\\t' ' ' | tr '\\n' ' '; echo",
        // The launcher hands the egress listeners and its IPC channel to the platform: none may reach
        // the sandbox's init or its child (fd 2 is the launcher's stderr, read for start-up errors).
        "echo initsockets:$(ls -l /proc/1/fd /proc/2/fd | grep socket: | grep -vc ' 2 -> ')",
      ].join("\n"),
    );
    assert.equal(r.status, 200);
    const out = r.body.stdout as string;
    for (const expected of [
      "curl4:blocked",
      "curl6:blocked",
      "py AF_INET True",
      "py AF_INET6 True",
      "fast True",
      "ifaces:lo,\n",
      "routes:0",
      "hostfile:hidden",
      "hostpid:hidden",
      "base:readonly",
      "etc:readonly",
      "python:intact",
      "rootdir:creatable",
      "etc:kept",
      "opt:kept",
      "userns:denied",
      "Seccomp: 2",
      "NoNewPrivs: 1",
      "CapEff: 0000000000000000",
      "initsockets:0\n",
    ]) {
      assert.ok(out.includes(expected), `expected "${expected}" in:\n${out}`);
    }
    // A request's environment reaches only the command, never the root launcher outside.
    const envCheck = await p.exec(box, 'echo "$PERL5OPT|$PERL5LIB"', {
      env: { PERL5OPT: "-Mwharf_not_a_module", PERL5LIB: "/home/user" },
    });
    assert.deepEqual(envCheck.body, { stdout: "-Mwharf_not_a_module|/home/user\n", stderr: "", exit_code: 0 });
    const procs = Number(/procs:(\d+)/.exec(out)?.[1]);
    assert.ok(procs > 0 && procs < 10, `a sandbox sees only its own processes (${procs})`);
    assert.equal(hostConnections, 0, "nothing reached the host's listeners");
  });

  test("a fork bomb hits the pids limit and a memory hog is OOM-killed in its own cgroup; the platform and other sandboxes carry on", async (t) => {
    const p = await startSandboxPlatform(t, { env: { WHARF_SANDBOX_PIDS_MAX: "64" } });
    if (!p) return;
    const bystander = await p.create({ name: "bystander" });
    const bomb = await p.create({ name: "bomb", cpu_millicores: 500 });
    const hog = await p.create({ name: "hog", mem_bytes: 64 * 1024 * 1024 });

    const forking = p.exec(bomb, "bomb() { bomb | bomb & }; bomb; sleep 2; echo survived-shell", { timeout: 6 });
    // Watch the bomb grow: it must get going, and never past the limit.
    let peak = 0;
    for (let i = 0; i < 40 && peak < 50; i++) {
      await new Promise((r) => setTimeout(r, 100));
      peak = Math.max(peak, p.manager().driver!.busyProcesses(bomb.id));
    }
    assert.ok(peak > 20 && peak <= 64, `the bomb ran into the pids limit of 64 (peak ${peak} processes)`);
    const fork = await forking;
    if (fork.status === 200) assert.match(fork.body.stderr, /Resource temporarily unavailable|retry/);
    else assert.equal(fork.status, 408);

    const oom = await p.exec(hog, "python3 -c 'x = bytearray(512 * 1024 * 1024); print(len(x))'", { timeout: 20 });
    assert.equal(oom.status, 200);
    assert.equal(oom.body.exit_code, 137, JSON.stringify(oom.body));
    assert.ok(p.manager().driver!.oomKills(hog.id) >= 1, "the kernel recorded the OOM kill in the sandbox's cgroup");
    // The hog's sandbox itself is still usable, and so is everything else.
    assert.deepEqual((await p.exec(hog, "echo alive")).body, { stdout: "alive\n", stderr: "", exit_code: 0 });
    assert.deepEqual((await p.exec(bystander, "echo fine")).body, { stdout: "fine\n", stderr: "", exit_code: 0 });
    const res = await p.api("/ok");
    assert.equal(res.status, 200);
    // Deleting the bomb's sandbox kills whatever of the bomb is left.
    assert.equal((await p.api("/v2/sandboxes/boxes/bomb", { method: "DELETE" })).status, 204);
  });

  test("another workspace can neither see nor use a sandbox (404 everywhere)", async (t) => {
    const p = await startSandboxPlatform(t);
    if (!p) return;
    const box = await p.create({ name: "mine" });
    const userId = await createUser(p.ctx.db, "other@example.com", "Other");
    const ws = await createWorkspace(p.ctx.db, "other", userId);
    const { key } = await createApiKey(p.ctx.db, { workspaceId: ws.id, userId, name: "other" });
    const as = (init: RequestInit = {}) => ({
      ...init,
      headers: { "x-api-key": key, "content-type": "application/json" },
    });
    for (const [method, url] of [
      ["GET", "/v2/sandboxes/boxes/mine"],
      ["GET", `/v2/sandboxes/boxes/${box.id}`],
      ["GET", "/v2/sandboxes/boxes/mine/status"],
      ["PATCH", "/v2/sandboxes/boxes/mine"],
      ["POST", "/v2/sandboxes/boxes/mine/stop"],
      ["POST", "/v2/sandboxes/boxes/mine/snapshot"],
      ["DELETE", "/v2/sandboxes/boxes/mine"],
    ]) {
      const body = method === "PATCH" ? "{}" : method === "POST" ? JSON.stringify({ name: "x" }) : undefined;
      const res: Response = await fetch(p.url + url, as({ method, body }));
      assert.equal(res.status, 404, `${method} ${url}`);
    }
    const list = await (await fetch(p.url + "/v2/sandboxes/boxes", as())).json();
    assert.equal(list.sandboxes.length, 0);
    let res = await fetch(
      `${box.dataplane_url}/execute`,
      as({ method: "POST", body: JSON.stringify({ command: "id" }) }),
    );
    assert.equal(res.status, 404);
    res = await fetch(`${box.dataplane_url}/download?path=/etc/hostname`, as());
    assert.equal(res.status, 404);
    const wsStatus = await new Promise<number>((resolve) => {
      const w = new WebSocket(box.dataplane_url.replace(/^http/, "ws") + "/execute/ws", {
        headers: { "X-Api-Key": key },
      });
      w.on("unexpected-response", (_q, r) => resolve(r.statusCode ?? 0));
      w.on("open", () => {
        w.close();
        resolve(101);
      });
      w.on("error", () => {});
    });
    assert.equal(wsStatus, 404);
    // And it is still there for its owner.
    assert.equal((await p.exec(box, "echo ok")).body.stdout, "ok\n");
  });
});
