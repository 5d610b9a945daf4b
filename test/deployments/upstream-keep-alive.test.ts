import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import fs from "node:fs";
import http from "node:http";
import os from "node:os";
import path from "node:path";
import { test } from "node:test";
import { sendUpstream } from "../../src/deployments/api/upstream.ts";
import { upstreamFailure, type UpstreamFailure } from "../../src/deployments/api/upstream-failure.ts";
import { AGENT_SERVER_KEEP_ALIVE_MS, UPSTREAM_IDLE_MS } from "../../src/deployments/runtime/keep-alive.ts";
import { until } from "../support/wait.ts";

test("which failed requests to an agent server may be sent again", () => {
  const table: Array<[{ code?: string; reusedSocket?: boolean }, UpstreamFailure]> = [
    [{ code: "ECONNREFUSED", reusedSocket: false }, "not-listening"],
    // A unix socket whose file is gone: the server stopped (or is not up yet).
    [{ code: "ENOENT", reusedSocket: false }, "not-listening"],
    [{ code: "ECONNRESET", reusedSocket: true }, "stale-socket"],
    // How a closed kept-alive unix socket fails: the write itself.
    [{ code: "EPIPE", reusedSocket: true }, "stale-socket"],
    // On a new connection the server may have read the request before it went away.
    [{ code: "ECONNRESET", reusedSocket: false }, "other"],
    [{ code: "EPIPE", reusedSocket: false }, "other"],
    [{ code: "ETIMEDOUT", reusedSocket: true }, "other"],
    [{ code: "ABORT_ERR", reusedSocket: true }, "other"],
    [{}, "other"],
  ];
  for (const [err, want] of table) assert.equal(upstreamFailure(err), want, JSON.stringify(err));
});

test("the proxy's pool lets go of an idle connection long before the agent server would", () => {
  assert.ok(AGENT_SERVER_KEEP_ALIVE_MS - UPSTREAM_IDLE_MS >= 30_000, "a margin no event-loop delay comes near");
});

/**
 * An agent server in its own process on a unix socket (as a confined revision serves), counting
 * the requests it reads; on a message it closes its idle connections, as its keep-alive timeout does.
 */
const SERVER = `
const http = require("node:http");
let requests = 0;
const server = http.createServer((req, res) => { requests++; req.resume(); req.on("end", () => res.end(String(requests))); });
process.on("message", (m) => { if (m === "close-idle") { server.closeIdleConnections(); process.send("closed"); } });
server.listen(process.argv[1], () => process.send("up"));
`;

test("a POST that meets a kept-alive connection its agent server closed is sent once more, on a new connection", async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "wharf-upstream-"));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const socket = path.join(dir, "agent.sock");
  const child = spawn(process.execPath, ["-e", SERVER, socket], { stdio: ["ignore", "inherit", "inherit", "ipc"] });
  t.after(() => child.kill());
  const message = (want: string) => new Promise<void>((resolve) => child.on("message", (m) => m === want && resolve()));
  await message("up");
  const post = async () => {
    const res = await sendUpstream(`unix:${socket}`, "/threads", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: Buffer.from("{}"),
    });
    let text = "";
    for await (const chunk of res) text += String(chunk);
    return { status: res.statusCode, text };
  };
  assert.deepEqual(await post(), { status: 200, text: "1" });

  // The server closes the idle connection while this process is too busy to read that close (a
  // loaded machine), then the next request takes that connection from the pool.
  child.send("close-idle");
  const closed = message("closed");
  const busyUntil = Date.now() + 500;
  while (Date.now() < busyUntil);
  const second = await post();
  await closed;
  // Read once by the server: the failed attempt never reached it.
  assert.deepEqual(second, { status: 200, text: "2" });
});

test("an idle pooled connection is closed by the proxy's side, not by the agent server", async (t) => {
  let closedByClient = false;
  let closed = false;
  const server = http.createServer((req, res) => res.end("ok"));
  server.keepAliveTimeout = AGENT_SERVER_KEEP_ALIVE_MS;
  server.on("connection", (s) => {
    s.on("end", () => (closedByClient = true));
    s.on("close", () => (closed = true));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  t.after(() => server.close());
  const res = await sendUpstream(`http://127.0.0.1:${(server.address() as { port: number }).port}`, "/ok", {
    method: "GET",
    headers: {},
    body: null,
  });
  res.resume();
  // Generous under load; the server itself would keep it for AGENT_SERVER_KEEP_ALIVE_MS.
  await until("the idle connection to close", async () => closed, 30_000);
  assert.ok(closedByClient, "the client (the proxy's pool) closed it");
});
