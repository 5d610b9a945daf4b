import assert from "node:assert/strict";
import net from "node:net";
import { describe, test } from "node:test";
import { DataPlaneGateway } from "../../src/deployments/runtime/data-plane-gateway.ts";
import { serverTimeouts } from "../../src/http/connection-guard.ts";

const connect = (port: number) =>
  new Promise<net.Socket>((resolve, reject) => {
    const s = net.connect(port, "127.0.0.1", () => resolve(s));
    s.once("error", reject);
  });
const closedWithin = (s: net.Socket, ms: number) =>
  new Promise<boolean>((resolve) => {
    if (s.destroyed) return resolve(true);
    const t = setTimeout(() => resolve(false), ms);
    s.once("close", () => (clearTimeout(t), resolve(true)));
  });

describe("a deployment's data-plane gateway", () => {
  test("holds at most its connection cap for the deployed code, and drops heads not sent within the header timeout", async (t) => {
    const timeouts = serverTimeouts({
      WHARF_HEADERS_TIMEOUT_MS: 600,
      WHARF_REQUEST_TIMEOUT_MS: 0,
      WHARF_KEEP_ALIVE_TIMEOUT_MS: 1000,
    });
    const gateway = new DataPlaneGateway(
      { deploymentId: "d", revisionId: "r", workspaceId: "w", userId: "u", key: "k" },
      { baseUrl: () => "http://127.0.0.1:9", box: null as never, limits: { maxConnections: 5, timeouts } },
    );
    const listener = net.createServer();
    await new Promise<void>((resolve) => listener.listen(0, "127.0.0.1", resolve));
    gateway.attach(listener);
    t.after(() => gateway.close());
    const port = (listener.address() as net.AddressInfo).port;

    const sockets = await Promise.all(Array.from({ length: 8 }, () => connect(port)));
    for (const s of sockets) s.on("error", () => {});
    const closedAtOnce = await Promise.all(sockets.map((s) => closedWithin(s, 300)));
    assert.equal(closedAtOnce.filter(Boolean).length, 3, "the three past the cap are closed at once");
    // The others send half a head and stall: closed by the header timeout.
    const kept = sockets.filter((_, i) => !closedAtOnce[i]);
    for (const s of kept) s.write("GET /v2/sandboxes/boxes HTTP/1.1\r\n");
    const closedLater = await Promise.all(kept.map((s) => closedWithin(s, 3000)));
    assert.ok(closedLater.every(Boolean), "slow heads are dropped");
    // Room again.
    const again = await connect(port);
    assert.equal(await closedWithin(again, 200), false);
    again.destroy();
  });
});
