import assert from "node:assert/strict";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { describe, test, type TestContext } from "node:test";
import { egressWebhookGate } from "../../src/agent-server/runs/webhook.ts";
import { checkOutboundUrl, outboundPolicy } from "../../src/egress/index.ts";
import { startTestAgentServer } from "./support.ts";

/**
 * A run's `webhook` is fetched by the agent server on the run creator's behalf: under the egress
 * address policy (as image pulls and clones), so a workspace member cannot make the server POST
 * to loopback, private, link-local or metadata addresses unless the operator allowed their range.
 */

/** No DNS: names resolve through the static table only, so no case dials or resolves anything real. */
const hosts = "metadata.test=169.254.169.254,public.test=93.184.216.34,inside.test=10.1.2.3,loop.test=127.0.0.1";
const policy = (allow: string[] = []) =>
  outboundPolicy({ WHARF_EGRESS_HOSTS: hosts, WHARF_EGRESS_ALLOW_INTERNAL: allow, WHARF_EGRESS_SYSTEM_DNS: false });

describe("a run's webhook under the egress address policy", () => {
  test("the decision (pure: the policy's resolver is a static table, nothing is dialled)", async () => {
    const cases: Array<[string, string[], string | RegExp]> = [
      ["http://169.254.169.254/latest/meta-data/", [], /169\.254\.169\.254 is an internal address/],
      ["http://metadata.test/computeMetadata/v1/", [], /metadata\.test resolves to an internal address/],
      ["http://[fd00:ec2::254]/", [], /internal address/],
      ["http://127.0.0.1:9/hook", [], /internal address/],
      ["http://127.1/hook", [], /internal address/],
      ["http://0x7f.1/hook", [], /internal address/],
      ["http://2130706433/hook", [], /internal address/],
      ["http://[::1]/hook", [], /internal address/],
      ["http://[::ffff:127.0.0.1]/hook", [], /internal address/],
      ["http://loop.test:8080/hook", [], /loop\.test resolves to an internal address/],
      ["https://10.1.2.3/hook", [], /internal address/],
      ["http://192.168.0.10/", [], /internal address/],
      ["http://0.0.0.0:9/", [], /internal address/],
      ["http://unknown.test/", [], /cannot be resolved/],
      // The operator's ranges, and public addresses.
      ["https://inside.test/hook", ["10.0.0.0/8"], "10.1.2.3"],
      ["http://127.0.0.1:9/hook", ["127.0.0.1/32"], "127.0.0.1"],
      ["http://169.254.169.254/", ["10.0.0.0/8"], /internal address/],
      ["https://public.test/hook", [], "93.184.216.34"],
      ["http://93.184.216.34:8080/hook", [], "93.184.216.34"],
    ];
    for (const [url, allow, expected] of cases) {
      const verdict = await checkOutboundUrl(policy(allow), new URL(url));
      if (typeof expected === "string") assert.deepEqual(verdict, { address: expected }, url);
      else
        assert.ok(
          "refused" in verdict && expected.test(verdict.refused),
          `${url} (allow ${allow.join(",") || "none"}): ${JSON.stringify(verdict)}`,
        );
    }
    // The gate tells the operator's way out.
    const gate = egressWebhookGate({
      WHARF_EGRESS_HOSTS: hosts,
      WHARF_EGRESS_ALLOW_INTERNAL: [],
      WHARF_EGRESS_SYSTEM_DNS: false,
    });
    const refused = await gate(new URL("http://metadata.test/"));
    assert.ok("refused" in refused && /WHARF_EGRESS_ALLOW_INTERNAL/.test(refused.refused), JSON.stringify(refused));
  });

  test("a run whose webhook names a loopback listener does not reach it; allowed by the operator, it does", async (t) => {
    const sink = await listener(t);
    // The default: the policy as the settings give it (no internal range allowed).
    const server = await startTestAgentServer(t, { open: true });
    if (!server) return;
    const client = server.client();
    for (const url of [
      `http://127.0.0.1:${sink.port}/hook`,
      `http://localhost:${sink.port}/hook`,
      `http://[::ffff:7f00:1]:${sink.port}/hook`,
      `http://127.1:${sink.port}/hook`,
    ]) {
      const out = await client.runs.wait(null, "echo", {
        input: { messages: [{ role: "human", content: "hi" }] },
        webhook: url,
      });
      assert.ok(out, "the run itself completes");
    }
    // A webhook is sent after the run ends, in the background: give any a moment to arrive.
    await new Promise((r) => setTimeout(r, 1500));
    assert.deepEqual(sink.requests, [], "no webhook request reached the loopback listener");

    // The same listener allowed by the operator: the webhook arrives (the test above could see one).
    const allowed = await startTestAgentServer(t, {
      open: true,
      webhookGate: egressWebhookGate({
        WHARF_EGRESS_HOSTS: "",
        WHARF_EGRESS_ALLOW_INTERNAL: ["127.0.0.1/32"],
        WHARF_EGRESS_SYSTEM_DNS: false,
      }),
    });
    if (!allowed) return;
    await allowed.client().runs.wait(null, "echo", {
      input: { messages: [{ role: "human", content: "hi" }] },
      webhook: `http://127.0.0.1:${sink.port}/hook`,
    });
    for (let i = 0; i < 50 && sink.requests.length === 0; i++) await new Promise((r) => setTimeout(r, 100));
    assert.deepEqual(sink.requests, ["POST /hook"]);
  });
});

/** A loopback listener that records every request it gets. */
async function listener(t: TestContext): Promise<{ port: number; requests: string[] }> {
  const requests: string[] = [];
  const server = http.createServer((req, res) => {
    requests.push(`${req.method} ${req.url}`);
    req.resume();
    res.end("ok");
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  t.after(() => new Promise<void>((r) => server.close(() => r())));
  return { port: (server.address() as AddressInfo).port, requests };
}
