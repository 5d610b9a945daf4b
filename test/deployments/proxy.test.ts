import assert from "node:assert/strict";
import http from "node:http";
import { test } from "node:test";
import { copyProject, lastMessage, pollRevision, startDeploymentsPlatform } from "./support.ts";

/** A raw HTTP/1.1 exchange, so the test controls framing (chunked bodies) and can hang up midway. */
function raw(
  url: string,
  init: { method: string; path: string; headers: Record<string, string>; chunks?: string[]; abortAfterMs?: number },
): Promise<{ status: number; headers: http.IncomingHttpHeaders; body: string } | "aborted"> {
  const u = new URL(url);
  return new Promise((resolve, reject) => {
    const req = http.request(
      { host: u.hostname, port: u.port, method: init.method, path: init.path, headers: init.headers },
      (res) => {
        let body = "";
        res.setEncoding("utf8");
        res.on("data", (d) => (body += d));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
      },
    );
    req.on("error", (err) => (init.abortAfterMs ? resolve("aborted") : reject(err)));
    if (init.abortAfterMs) setTimeout(() => req.destroy(), init.abortAfterMs);
    for (const c of init.chunks ?? []) req.write(c);
    req.end();
  });
}

test("the stable URL: chunked request bodies, the body limit, request ids, a client that hangs up, HEAD", async (t) => {
  const p = (await startDeploymentsPlatform(t, { env: { WHARF_BODY_LIMIT_BYTES: "4096" } }))!;
  const res = await p.api("/v2/deployments", {
    method: "POST",
    json: {
      name: "proxy",
      source: "internal_source",
      source_config: {},
      source_revision_config: { langgraph_config_path: "langgraph.json", local_path: copyProject(t, "echo") },
      secrets: [],
    },
  });
  const d = await res.json();
  assert.equal((await pollRevision(p, d.id, d.latest_revision_id)).status, "DEPLOYED");
  const prefix = `/deployments/${d.id}`;
  const auth = { "x-api-key": p.apiKey, "content-type": "application/json" };
  const run = JSON.stringify({ assistant_id: "echo", input: { messages: [{ role: "human", content: "chunked" }] } });

  // A chunked body (no Content-Length) arrives whole.
  const chunked = await raw(p.url, {
    method: "POST",
    path: `${prefix}/runs/wait`,
    headers: { ...auth, "transfer-encoding": "chunked" },
    chunks: [run.slice(0, 10), run.slice(10)],
  });
  assert.ok(chunked !== "aborted");
  assert.equal(chunked.status, 200, chunked.body);
  assert.equal(lastMessage(JSON.parse(chunked.body)), "echo: chunked");
  // Each answer carries the platform's request id.
  assert.match(String(chunked.headers["x-request-id"]), /.+/);

  // The platform's body limit holds, announced or counted.
  const big = JSON.stringify({
    assistant_id: "echo",
    input: { messages: [{ role: "human", content: "x".repeat(5000) }] },
  });
  const announced = await raw(p.url, {
    method: "POST",
    path: `${prefix}/runs/wait`,
    headers: { ...auth, "content-length": String(Buffer.byteLength(big)) },
    chunks: [big],
  });
  assert.ok(announced !== "aborted");
  assert.equal(announced.status, 413);
  assert.match(JSON.parse(announced.body).detail, /Request body too large/);
  const counted = await raw(p.url, {
    method: "POST",
    path: `${prefix}/runs/wait`,
    headers: { ...auth, "transfer-encoding": "chunked" },
    chunks: [big.slice(0, 3000), big.slice(3000)],
  });
  assert.ok(counted !== "aborted");
  assert.equal(counted.status, 413);

  // A client that hangs up while the agent server works does not disturb the next call.
  assert.equal(
    await raw(p.url, { method: "GET", path: `${prefix}/slow?ms=1500`, headers: auth, abortAfterMs: 200 }),
    "aborted",
  );
  const after = await raw(p.url, { method: "GET", path: `${prefix}/slow?ms=10`, headers: auth });
  assert.ok(after !== "aborted");
  assert.equal(after.status, 200);

  // HEAD answers the agent server's head only (the fixture server knows GET /ok only: 401).
  const head = await raw(p.url, { method: "HEAD", path: `${prefix}/ok`, headers: {} });
  assert.ok(head !== "aborted");
  assert.equal(head.status, 401);
  assert.equal(head.body, "");
  const ok = await raw(p.url, { method: "GET", path: `${prefix}/ok`, headers: {} });
  assert.ok(ok !== "aborted");
  assert.equal(ok.status, 200);
});
