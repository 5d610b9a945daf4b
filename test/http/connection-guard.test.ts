import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { EventEmitter } from "node:events";
import type http from "node:http";
import {
  admission,
  clientKey,
  guardConnections,
  serverTimeouts,
  type Admission,
} from "../../src/http/connection-guard.ts";
import type { Logger } from "../../src/log/logger.ts";

describe("clientKey", () => {
  const cases: Array<[string | undefined, string | null]> = [
    ["198.51.100.7", "198.51.100.7"],
    ["::ffff:198.51.100.7", "198.51.100.7"],
    ["2001:db8:1:2:3:4:5:6", "2001:db8:1:2::/64"],
    ["2001:db8:1:2::9", "2001:db8:1:2::/64"],
    ["2001:0db8:0001:0002:ffff::1", "2001:db8:1:2::/64"],
    ["2001:db8::1", "2001:db8:0:0::/64"],
    ["127.0.0.1", null],
    ["127.3.4.5", null],
    ["::ffff:127.0.0.1", null],
    ["::1", null],
    [undefined, "unknown"],
  ];
  for (const [address, key] of cases) test(`${address} counts as ${key}`, () => assert.equal(clientKey(address), key));
});

describe("guardConnections", () => {
  /** A stand-in for an accepted socket: only what the guard touches. */
  class FakeSocket extends EventEmitter {
    destroyed = false;
    constructor(readonly remoteAddress: string) {
      super();
    }
    destroy() {
      if (this.destroyed) return;
      this.destroyed = true;
      queueMicrotask(() => this.emit("close"));
    }
  }
  const quiet = { warn() {} } as unknown as Logger;
  /** A server under the guard, and a way to hand it a connection from an address. */
  const guarded = (caps: { total: number; perClient: number }) => {
    const server = new EventEmitter() as unknown as http.Server;
    guardConnections(server, caps, 10_000, quiet);
    const accept = (address: string) => {
      const s = new FakeSocket(address);
      server.emit("connection", s);
      return s;
    };
    return { server, accept };
  };

  test("past the per-client cap a connection is closed; other clients and loopback are not counted against it", async () => {
    const { accept } = guarded({ total: 100, perClient: 3 });
    const first = Array.from({ length: 5 }, () => accept("198.51.100.7"));
    assert.deepEqual(
      first.map((s) => s.destroyed),
      [false, false, false, true, true],
    );
    assert.equal(accept("198.51.100.8").destroyed, false, "another address has its own share");
    assert.equal(accept("2001:db8:1:2::1").destroyed, false);
    assert.equal(accept("2001:db8:1:2::2").destroyed, false);
    assert.equal(accept("2001:db8:1:2::3").destroyed, false);
    assert.equal(accept("2001:db8:1:2::4").destroyed, true, "a /64 is one client");
    assert.ok(
      Array.from({ length: 10 }, () => accept("127.0.0.1")).every((s) => !s.destroyed),
      "loopback is not capped per client",
    );
    first[0].destroy();
    await new Promise((r) => setImmediate(r));
    assert.equal(accept("198.51.100.7").destroyed, false, "a closed connection frees its place");
  });

  test("past the total cap the oldest connection without a request head makes room; requests under way are kept", async () => {
    const { server, accept } = guarded({ total: 3, perClient: 0 });
    const [a, b, c] = [accept("198.51.100.1"), accept("198.51.100.2"), accept("198.51.100.3")];
    server.emit("request", { socket: a });
    const d = accept("198.51.100.4");
    assert.deepEqual(
      [a, b, c, d].map((s) => s.destroyed),
      [false, true, false, false],
      "b, the oldest still waiting for its head, made room",
    );
    await new Promise((r) => setImmediate(r));
    server.emit("request", { socket: c });
    server.emit("request", { socket: d });
    const e = accept("198.51.100.5");
    assert.equal(e.destroyed, true, "nothing to evict: refused");
  });
});

describe("admission", () => {
  const caps = { total: 10, perClient: 3 };
  const cases: Array<[string, { total: number; perClient: number }, number, number, number, Admission]> = [
    ["room for everyone", caps, 5, 1, 0, "admit"],
    ["the client is at its cap", caps, 5, 3, 4, "refuse-client"],
    ["full, a slow head to replace", caps, 10, 0, 2, "admit-evicting"],
    ["full of requests under way", caps, 10, 0, 0, "refuse-total"],
    ["no caps", { total: 0, perClient: 0 }, 100_000, 100_000, 0, "admit"],
    ["no total cap", { total: 0, perClient: 3 }, 100_000, 2, 0, "admit"],
  ];
  for (const [name, c, open, fromClient, evictable, want] of cases)
    test(name, () => assert.equal(admission(c, open, fromClient, evictable), want));
});

describe("serverTimeouts", () => {
  test("the header timeout never exceeds the request timeout; Node checks several times per header timeout", () => {
    assert.deepEqual(
      serverTimeouts({
        WHARF_HEADERS_TIMEOUT_MS: 10_000,
        WHARF_REQUEST_TIMEOUT_MS: 300_000,
        WHARF_KEEP_ALIVE_TIMEOUT_MS: 5000,
      }),
      {
        headersTimeout: 10_000,
        requestTimeout: 300_000,
        keepAliveTimeout: 5000,
        connectionsCheckingInterval: 1000,
      },
    );
    assert.equal(
      serverTimeouts({
        WHARF_HEADERS_TIMEOUT_MS: 10_000,
        WHARF_REQUEST_TIMEOUT_MS: 2000,
        WHARF_KEEP_ALIVE_TIMEOUT_MS: 5000,
      }).headersTimeout,
      2000,
    );
    assert.equal(
      serverTimeouts({
        WHARF_HEADERS_TIMEOUT_MS: 10_000,
        WHARF_REQUEST_TIMEOUT_MS: 0,
        WHARF_KEEP_ALIVE_TIMEOUT_MS: 5000,
      }).headersTimeout,
      10_000,
    );
    assert.equal(
      serverTimeouts({ WHARF_HEADERS_TIMEOUT_MS: 1000, WHARF_REQUEST_TIMEOUT_MS: 0, WHARF_KEEP_ALIVE_TIMEOUT_MS: 5000 })
        .connectionsCheckingInterval,
      250,
    );
  });
});
