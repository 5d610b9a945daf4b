import assert from "node:assert/strict";
import { test } from "node:test";
import { loadSettings } from "../../src/config/index.ts";
import { egressSourceFrom, loadEgressSettings } from "../../src/egress/egress-settings.ts";

// The egress settings come from the declared settings (one parser, the start-up check's): every
// spelling that check accepts means the same to the proxy. Before, the proxy parsed the
// environment again and took anything but "0" for on, so WHARF_EGRESS_SYSTEM_DNS=false passed the
// check and was then ignored.
test("WHARF_EGRESS_SYSTEM_DNS: each accepted spelling reaches the proxy", () => {
  const cases: Array<[string | undefined, boolean]> = [
    [undefined, true],
    ["1", true],
    ["true", true],
    ["0", false],
    ["false", false],
  ];
  for (const [value, systemDns] of cases) {
    const declared = loadSettings(value === undefined ? {} : { WHARF_EGRESS_SYSTEM_DNS: value });
    assert.equal(
      loadEgressSettings(egressSourceFrom(declared)).systemDns,
      systemDns,
      `WHARF_EGRESS_SYSTEM_DNS=${value}`,
    );
  }
  // The old path: the raw variable parsed again (kept for sources of a test's own), "false" was on.
  assert.equal(loadEgressSettings({ WHARF_EGRESS_SYSTEM_DNS: "false" }).systemDns, true);
});

test("the declared egress settings map one to one onto the proxy's", () => {
  const declared = loadSettings({
    WHARF_EGRESS_HOSTS: "api.test=127.0.0.1:8443",
    WHARF_EGRESS_ALLOW_INTERNAL: "10.0.0.0/8, 192.168.1.1",
    WHARF_EGRESS_HEADER_TIMEOUT_MS: "2500",
    WHARF_EGRESS_IDLE_TIMEOUT_MS: "9000",
    WHARF_EGRESS_MAX_CONNECTIONS: "7",
    WHARF_EGRESS_FAULT_HOOK: "true",
    WHARF_EGRESS_PROXY_PORT: "3129",
    WHARF_EGRESS_SYSTEM_CA_FILE: "none",
  });
  const s = loadEgressSettings(egressSourceFrom(declared));
  assert.deepEqual(s.hosts.get("api.test"), { address: "127.0.0.1", port: 8443 });
  assert.equal(s.allowInternal.has("10.1.2.3"), true);
  assert.equal(s.allowInternal.has("192.168.1.1"), true);
  assert.deepEqual(
    [s.headerTimeoutMs, s.idleTimeoutMs, s.maxConnections, s.faultHook, s.proxyPort, s.systemCaFile],
    [2500, 9000, 7, true, 3129, null],
  );
});
