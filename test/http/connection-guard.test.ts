import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { admission, clientKey, serverTimeouts, type Admission } from "../../src/http/connection-guard.ts";

describe("clientKey", () => {
  const cases: Array<[string | undefined, string]> = [
    ["127.0.0.1", "127.0.0.1"],
    ["::ffff:10.1.2.3", "10.1.2.3"],
    ["2001:db8:1:2:3:4:5:6", "2001:db8:1:2::/64"],
    ["2001:db8:1:2::9", "2001:db8:1:2::/64"],
    ["2001:0db8:0001:0002:ffff::1", "2001:db8:1:2::/64"],
    ["2001:db8::1", "2001:db8:0:0::/64"],
    ["::1", "0:0:0:0::/64"],
    [undefined, "unknown"],
  ];
  for (const [address, key] of cases) test(`${address} counts as ${key}`, () => assert.equal(clientKey(address), key));
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
  for (const [name, c, open, fromClient, evictable, want] of cases) test(name, () => assert.equal(admission(c, open, fromClient, evictable), want));
});

describe("serverTimeouts", () => {
  test("the header timeout never exceeds the request timeout; Node checks several times per header timeout", () => {
    assert.deepEqual(serverTimeouts({ WHARF_HEADERS_TIMEOUT_MS: 10_000, WHARF_REQUEST_TIMEOUT_MS: 300_000, WHARF_KEEP_ALIVE_TIMEOUT_MS: 5000 }), {
      headersTimeout: 10_000,
      requestTimeout: 300_000,
      keepAliveTimeout: 5000,
      connectionsCheckingInterval: 1000,
    });
    assert.equal(serverTimeouts({ WHARF_HEADERS_TIMEOUT_MS: 10_000, WHARF_REQUEST_TIMEOUT_MS: 2000, WHARF_KEEP_ALIVE_TIMEOUT_MS: 5000 }).headersTimeout, 2000);
    assert.equal(serverTimeouts({ WHARF_HEADERS_TIMEOUT_MS: 10_000, WHARF_REQUEST_TIMEOUT_MS: 0, WHARF_KEEP_ALIVE_TIMEOUT_MS: 5000 }).headersTimeout, 10_000);
    assert.equal(serverTimeouts({ WHARF_HEADERS_TIMEOUT_MS: 1000, WHARF_REQUEST_TIMEOUT_MS: 0, WHARF_KEEP_ALIVE_TIMEOUT_MS: 5000 }).connectionsCheckingInterval, 250);
  });
});
