import assert from "node:assert/strict";
import { WS_ECHO } from "../support/sandbox-servers.ts";
import crypto from "node:crypto";
import { test } from "node:test";
import WebSocket from "ws";
import { SandboxClient, type ServiceUrl } from "langsmith-next/sandbox";
import { replicaId, startReplicas } from "./support.ts";

test("a sandbox created through replica A is driven through replica B: exec, pty over WebSocket, files up and down, download link, service URL (HTTP and WebSocket)", async (t) => {
  const set = await startReplicas(t, ["a", "b"]);
  if (!set) return;
  const [a, b] = set.replicas;
  const clientA = new SandboxClient({ apiEndpoint: `${a.url}/v2/sandboxes`, apiKey: set.apiKey, maxRetries: 0 });
  const clientB = new SandboxClient({ apiEndpoint: `${b.url}/v2/sandboxes`, apiKey: set.apiKey, maxRetries: 0 });
  const created = await clientA.createSandbox(undefined, { name: "across" });
  assert.equal(created.status, "ready");
  const [row] = await set.query<{ owner_replica: string }>("SELECT owner_replica FROM sandboxes WHERE id = $1", [
    created.id,
  ]);
  assert.equal(row.owner_replica, replicaId(a.home), "the replica that provisioned it owns it");

  // Through B: B holds nothing of this sandbox, so every answer below came from A through B.
  const sb = await clientB.getSandbox("across");
  assert.ok(sb.dataplane_url!.startsWith(b.url), sb.dataplane_url);
  const r = await sb.run("echo hello from $(cat /proc/1/comm) && echo err >&2", { timeout: 30 });
  assert.equal(r.exit_code, 0);
  assert.match(r.stdout, /^hello from /);
  assert.equal(r.stderr, "err\n");

  // pty over the execute WebSocket, input included.
  const tty = await sb.run("tty; stty size", { pty: true, timeout: 20 });
  assert.match(tty.stdout, /^\/dev\/pts\/\d+\r\n24 80\r\n$/);
  const h = await sb.run('read -r x; echo "got:$x"', { pty: true, wait: false, timeout: 20 });
  h.sendInput("over-b\n");
  assert.match((await h.result).stdout, /got:over-b/);

  // Files: a binary upload and its download, through B both ways.
  const blob = crypto.randomBytes(3 * 1024 * 1024 + 17);
  await sb.write("/home/user/blob.bin", blob);
  const back = Buffer.from(await sb.read("/home/user/blob.bin"));
  assert.equal(back.length, blob.length);
  assert.ok(back.equals(blob), "downloaded bytes equal the uploaded ones");
  const link = await sb.generateDownloadURL("/home/user/blob.bin", { expiresInSeconds: 60 });
  assert.ok(link.download_url.startsWith(b.url), link.download_url);
  const dl = await fetch(link.download_url);
  assert.equal(dl.status, 200);
  assert.ok(Buffer.from(await dl.arrayBuffer()).equals(blob));

  // A service inside the box, HTTP and WebSocket, by a service URL minted by B.
  await sb.write("/home/user/www/hello.txt", "hello from the box\n");
  await sb.write("/home/user/ws.py", WS_ECHO);
  await sb.run(
    "cd www && nohup python3 -m http.server 8000 --bind 127.0.0.1 >/dev/null 2>&1 & nohup python3 ws.py >/dev/null 2>&1 & for p in 8000 8765; do for i in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/$p) 2>/dev/null && break; sleep 0.1; done; done",
    { timeout: 30 },
  );
  const svc = (await clientB.serviceUrl("across", { port: 8000, expiresInSeconds: 120 })) as ServiceUrl;
  const page = await svc.fetch("/hello.txt");
  assert.equal(page.status, 200);
  assert.equal(await page.text(), "hello from the box\n");
  assert.ok((await svc.serviceUrl()).startsWith(b.url));
  const wsSvc = (await clientB.serviceUrl("across", { port: 8765, expiresInSeconds: 120 })) as ServiceUrl;
  const echoed = await new Promise<string>((resolve, reject) => {
    void (async () => {
      const ws = new WebSocket((await wsSvc.serviceUrl()).replace(/^http/, "ws") + "/", {
        headers: { "X-Langsmith-Sandbox-Service-Token": await wsSvc.token() },
      });
      ws.on("open", () => ws.send("ping"));
      ws.on("message", (d) => {
        resolve(d.toString());
        ws.close();
      });
      ws.on("error", reject);
    })().catch(reject);
  });
  assert.equal(echoed, "echo: ping");

  // An unauthenticated data-plane call through B is refused by the owner as it would be directly.
  const anon = await fetch(`${b.url}/sandboxes/dp/${created.id}/execute`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ command: "true" }),
  });
  assert.equal(anon.status, 401);
  await clientA.deleteSandbox("across");
});
