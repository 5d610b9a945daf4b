import assert from "node:assert/strict";
import { test } from "node:test";
import { CidrSet } from "../../src/egress/policy/address-class.ts";
import { checkOutbound, outboundAddressProblem } from "../../src/egress/outbound/outbound-policy.ts";
import { directDestinations } from "../../src/sandboxes/driver/oci-image.ts";

test("outbound fetches: internal addresses only where the operator allows their range", () => {
  const none = new CidrSet([]);
  const loop = new CidrSet(["127.0.0.0/8"]);
  const cases: Array<[string, CidrSet, boolean]> = [
    ["93.184.216.34", none, true],
    ["127.0.0.1", none, false],
    ["127.0.0.1", loop, true],
    ["10.0.0.5", loop, false],
    ["169.254.169.254", none, false],
    ["::1", none, false],
    ["::ffff:127.0.0.1", loop, false],
    ["fd00:ec2::254", none, false],
    ["0.0.0.0", none, false],
    ["100.64.0.1", none, false],
    ["2606:4700::1111", none, true],
  ];
  for (const [address, allow, ok] of cases) assert.equal(outboundAddressProblem(address, allow) === null, ok, address);
});

test("outbound fetches: a name is checked on every address it resolves to and the checked one is dialled", async () => {
  const policy = (addresses: string[], allow: string[] = []) => ({
    resolve: async () => addresses.map((address) => ({ address, port: 443 })),
    allowInternal: new CidrSet(allow),
  });
  const name = { kind: "name" as const, host: "registry.test" };
  assert.deepEqual(await checkOutbound(policy(["127.0.0.1"]), name, 443), {
    refused: "registry.test resolves to an internal address (loopback)",
  });
  assert.deepEqual(await checkOutbound(policy(["127.0.0.1", "93.184.216.34"]), name, 443), {
    address: "93.184.216.34",
  });
  assert.deepEqual(await checkOutbound(policy(["127.0.0.1"], ["127.0.0.1/32"]), name, 443), { address: "127.0.0.1" });
  const failing = { resolve: async () => Promise.reject(new Error("nx")), allowInternal: new CidrSet([]) };
  assert.deepEqual(await checkOutbound(failing, name, 443), { refused: "registry.test cannot be resolved" });
});

test("image pulls: loopback registries are tunnelled through the proxy, others use it as a proxy", () => {
  const cases: Array<[string, string[]]> = [
    ["127.0.0.1:5000", ["127.0.0.1:5000"]],
    ["localhost", ["localhost:443", "localhost:80"]],
    ["registry.example.com", []],
    ["docker.io", []],
  ];
  for (const [host, want] of cases) assert.deepEqual(directDestinations(host), want, host);
});
