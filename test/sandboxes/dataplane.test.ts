import assert from "node:assert/strict";
import crypto from "node:crypto";
import net from "node:net";
import { describe, test } from "node:test";
import WebSocket from "ws";
import { startSandboxPlatform } from "./support.ts";

interface Msg {
  type: string;
  [k: string]: any;
}

/** Opens the execute WebSocket and collects messages until `until` says stop or the socket closes. */
function wsSession(
  url: string,
  apiKey: string,
  first: unknown,
  until: (m: Msg, all: Msg[]) => boolean = () => false,
): Promise<{ msgs: Msg[]; ws: WebSocket; closed: Promise<void> }> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url.replace(/^http/, "ws") + "/execute/ws", { headers: { "X-Api-Key": apiKey } });
    const msgs: Msg[] = [];
    const closed = new Promise<void>((r) => ws.on("close", () => r()));
    ws.on("open", () => ws.send(JSON.stringify(first)));
    ws.on("error", reject);
    ws.on("unexpected-response", (_req, res) => reject(new Error(`upgrade rejected: ${res.statusCode}`)));
    ws.on("message", (d) => {
      const m = JSON.parse(d.toString()) as Msg;
      msgs.push(m);
      if (until(m, msgs)) resolve({ msgs, ws, closed });
    });
    ws.on("close", () => resolve({ msgs, ws, closed }));
  });
}

const text = (msgs: Msg[], type: string) =>
  msgs
    .filter((m) => m.type === type)
    .map((m) => m.data)
    .join("");

describe("sandbox data plane", () => {
  test("WebSocket exec streams with offsets; a dropped client reconnects without losing output; kill and input work", async (t) => {
    const p = await startSandboxPlatform(t);
    if (!p) return;
    const box = await p.create({ name: "ws" });
    // Streams, then gets dropped after the first chunk.
    const script = 'for i in 1 2 3 4 5 6; do echo "line $i"; sleep 0.1; done; echo done >&2; exit 7';
    const a = await wsSession(
      box.dataplane_url,
      p.apiKey,
      { type: "execute", command: script, timeout_seconds: 30 },
      (m) => m.type === "stdout",
    );
    assert.equal(a.msgs[0].type, "started");
    const commandId = a.msgs[0].command_id;
    assert.ok(a.msgs[0].pid > 0);
    const seen = text(a.msgs, "stdout");
    const offset = Buffer.byteLength(seen);
    a.ws.terminate();
    await a.closed;
    await new Promise((r) => setTimeout(r, 250));
    const b = await wsSession(
      box.dataplane_url,
      p.apiKey,
      { type: "reconnect", command_id: commandId, stdout_offset: offset, stderr_offset: 0 },
      (m) => m.type === "exit",
    );
    assert.equal(b.msgs[0].type, "started");
    assert.equal(seen + text(b.msgs, "stdout"), "line 1\nline 2\nline 3\nline 4\nline 5\nline 6\n");
    const firstResumed = b.msgs.find((m) => m.type === "stdout");
    assert.equal(firstResumed?.offset, offset);
    assert.equal(text(b.msgs, "stderr"), "done\n");
    assert.deepEqual(b.msgs.at(-1), { type: "exit", exit_code: 7 });

    // stdin and kill.
    const c = await wsSession(
      box.dataplane_url,
      p.apiKey,
      { type: "execute", command: "read x; echo got:$x; sleep 60" },
      (m) => m.type === "stdout" || m.type === "started",
    );
    c.ws.send(JSON.stringify({ type: "input", data: "hello\n" }));
    await new Promise<void>((resolve) =>
      c.ws.on("message", (d) => JSON.parse(d.toString()).type === "stdout" && resolve()),
    );
    c.ws.send(JSON.stringify({ type: "kill" }));
    const exit = await new Promise<Msg>((resolve) =>
      c.ws.on("message", (d) => JSON.parse(d.toString()).type === "exit" && resolve(JSON.parse(d.toString()))),
    );
    assert.ok(exit.exit_code === 137 || exit.exit_code === 128 + 9, `exit ${exit.exit_code}`);

    // Unknown command id.
    const d = await wsSession(
      box.dataplane_url,
      p.apiKey,
      { type: "reconnect", command_id: "nope" },
      (m) => m.type === "error",
    );
    assert.equal(d.msgs[0].error_type, "CommandNotFound");
    // Wrong key: the upgrade is refused.
    await assert.rejects(wsSession(box.dataplane_url, "wrong", { type: "execute", command: "true" }), /401/);
  });

  test("upload, download with Range, errors; timeout", async (t) => {
    const p = await startSandboxPlatform(t);
    if (!p) return;
    const box = await p.create({ name: "files" });
    const payload = Buffer.from("0123456789".repeat(1000));
    const form = new FormData();
    form.set("file", new Blob([payload]), "data.bin");
    let res = await fetch(`${box.dataplane_url}/upload?path=${encodeURIComponent("dir/sub/data.bin")}`, {
      method: "POST",
      headers: { "x-api-key": p.apiKey },
      body: form,
    });
    assert.equal(res.status, 200);
    const r = await p.exec(box, "wc -c < /home/user/dir/sub/data.bin; stat -c %U /home/user/dir/sub/data.bin");
    assert.equal(r.body.stdout, "10000\nuser\n");
    res = await fetch(`${box.dataplane_url}/download?path=/home/user/dir/sub/data.bin`, {
      headers: { "x-api-key": p.apiKey },
    });
    assert.equal(res.status, 200);
    assert.deepEqual(Buffer.from(await res.arrayBuffer()), payload);
    res = await fetch(`${box.dataplane_url}/download?path=dir/sub/data.bin`, {
      headers: { "x-api-key": p.apiKey, range: "bytes=5-14" },
    });
    assert.equal(res.status, 206);
    assert.equal(res.headers.get("content-range"), "bytes 5-14/10000");
    assert.equal(await res.text(), "5678901234");
    res = await fetch(`${box.dataplane_url}/download?path=dir/sub/data.bin`, {
      headers: { "x-api-key": p.apiKey, range: "bytes=-3" },
    });
    assert.equal(await res.text(), "789");
    res = await fetch(`${box.dataplane_url}/download?path=/nope`, { headers: { "x-api-key": p.apiKey } });
    assert.equal(res.status, 404);
    assert.equal((await res.json()).detail.error, "FileNotFound");
    res = await fetch(`${box.dataplane_url}/download?path=/etc/shadow-does-not-exist`, {
      headers: { "x-api-key": p.apiKey },
    });
    assert.equal(res.status, 404);
    const form2 = new FormData();
    form2.set("file", new Blob(["x"]), "x");
    res = await fetch(`${box.dataplane_url}/upload?path=/usr/bin/evil`, {
      method: "POST",
      headers: { "x-api-key": p.apiKey },
      body: form2,
    });
    assert.equal(res.status, 403);
    assert.equal((await res.json()).detail.error, "WriteError");
    res = await fetch(`${box.dataplane_url}/download?path=/home/user/dir`, { headers: { "x-api-key": p.apiKey } });
    assert.equal(res.status, 400);

    const slow = await p.exec(box, "sleep 10", { timeout: 1 });
    assert.equal(slow.status, 408);
    assert.equal(slow.body.detail.error, "CommandTimeout");
    const bad = await p.exec(box, "", {});
    assert.equal(bad.status, 422);
  });

  test("uploads stream: past the JSON body limit; past fs_capacity_bytes 413 keeps the old file; a cut-off form commits nothing", async (t) => {
    const p = await startSandboxPlatform(t);
    if (!p) return;
    const box = await p.create({ name: "big-files", fs_capacity_bytes: 64 * 1024 * 1024 });
    const upload = (path: string, data: Uint8Array) => {
      const form = new FormData();
      form.set("note", "a field before the file is drained");
      form.set("file", new Blob([data as Uint8Array<ArrayBuffer>]), "f.bin");
      return fetch(`${box.dataplane_url}/upload?path=${encodeURIComponent(path)}`, {
        method: "POST",
        headers: { "x-api-key": p.apiKey },
        body: form,
      });
    };
    // 12 MiB: more than WHARF_BODY_LIMIT_BYTES (10 MiB), streamed into the sandbox.
    const big = crypto.randomBytes(12 * 1024 * 1024);
    let res = await upload("data/big.bin", big);
    assert.equal(res.status, 200, await res.clone().text());
    assert.deepEqual(await res.json(), { path: "data/big.bin", size: big.length });
    let r = await p.exec(box, "sha256sum < data/big.bin | cut -d' ' -f1");
    assert.equal(r.body.stdout.trim(), crypto.createHash("sha256").update(big).digest("hex"));

    // Past fs_capacity_bytes: 413, and the file that was there stays whole.
    res = await upload("data/big.bin", new Uint8Array(65 * 1024 * 1024));
    assert.equal(res.status, 413, await res.clone().text());
    assert.equal((await res.json()).detail.error, "WriteError");
    r = await p.exec(box, "sha256sum < data/big.bin | cut -d' ' -f1; ls -A data");
    assert.equal(
      r.body.stdout,
      `${crypto.createHash("sha256").update(big).digest("hex")}\nbig.bin\n`,
      "no temporary file left behind",
    );

    // A form without the file field is a 422; so is a body that is not multipart.
    const noFile = new FormData();
    noFile.set("other", "x");
    res = await fetch(`${box.dataplane_url}/upload?path=x`, {
      method: "POST",
      headers: { "x-api-key": p.apiKey },
      body: noFile,
    });
    assert.equal(res.status, 422);
    assert.deepEqual((await res.json()).detail[0].loc, ["body", "file"]);
    res = await fetch(`${box.dataplane_url}/upload?path=x`, {
      method: "POST",
      headers: { "x-api-key": p.apiKey, "content-type": "application/json" },
      body: "{}",
    });
    assert.equal(res.status, 422);

    // The client goes away halfway through the file: nothing is committed, nothing is left over.
    const url = new URL(`${box.dataplane_url}/upload?path=data/cut.bin`);
    const boundary = "wharf-cut-boundary";
    const head = `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="cut.bin"\r\nContent-Type: application/octet-stream\r\n\r\n`;
    const socket = net.connect(Number(url.port), url.hostname);
    await new Promise((resolve) => socket.once("connect", resolve));
    socket.write(
      `POST ${url.pathname}${url.search} HTTP/1.1\r\nHost: ${url.host}\r\nX-Api-Key: ${p.apiKey}\r\nContent-Type: multipart/form-data; boundary=${boundary}\r\nContent-Length: ${head.length + 4 * 1024 * 1024}\r\n\r\n${head}`,
    );
    socket.write(Buffer.alloc(1024 * 1024, 1));
    await new Promise((resolve) => setTimeout(resolve, 300));
    socket.destroy();
    await new Promise((resolve) => setTimeout(resolve, 500));
    r = await p.exec(box, "ls -A data");
    assert.equal(r.body.stdout, "big.bin\n", "a cut-off upload leaves neither the file nor its temporary copy");
  });

  test("snapshot captures files (and deletions); a new sandbox starts from it", async (t) => {
    const p = await startSandboxPlatform(t);
    if (!p) return;
    const box = await p.create({ name: "origin" });
    await p.exec(
      box,
      "mkdir -p ~/proj && echo v1 > ~/proj/a.txt && echo tmp > /tmp/t && rm /home/user/../user/proj/a.txt && echo v2 > ~/proj/b.txt",
    );
    let res = await p.api("/v2/sandboxes/boxes/origin/snapshot", { method: "POST", json: { name: "proj" } });
    assert.equal(res.status, 201);
    const snap = await res.json();
    assert.equal(snap.status, "ready");
    assert.equal(snap.source_sandbox_id, box.id);
    assert.ok(snap.size_bytes > 0);
    res = await p.api("/v2/sandboxes/snapshots-by-name/proj");
    assert.equal((await res.json()).id, snap.id);
    res = await p.api("/v2/sandboxes/snapshots?name_contains=pro");
    assert.equal((await res.json()).snapshots.length, 1);

    const copy = await p.create({ name: "copy", snapshot_name: "proj" });
    assert.equal(copy.snapshot_id, snap.id);
    const r = await p.exec(copy, "cat ~/proj/b.txt; ls ~/proj; cat /tmp/t; echo mine > ~/mine");
    assert.equal(r.body.stdout, "v2\nb.txt\ntmp\n");
    const r2 = await p.exec(box, "ls ~");
    assert.equal(r2.body.stdout, "proj\n");
    res = await p.api(`/v2/sandboxes/snapshots/${snap.id}`, { method: "DELETE" });
    assert.equal(res.status, 204);
    res = await p.api(`/v2/sandboxes/snapshots/${snap.id}`);
    assert.equal(res.status, 404);
  });
});
