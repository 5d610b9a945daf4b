import assert from "node:assert/strict";
import { Readable } from "node:stream";
import { describe, test } from "node:test";
import type { OutboundRequest, RequestAuthorizer } from "../../src/egress/proxy/egress-proxy.ts";
import { curl, parseCurl, startProxy } from "./support/proxy.ts";
import { startUpstreams } from "./support/upstreams.ts";

/**
 * The extension point the cloud credential engines plug into: authorizers run after access control, Host
 * verification and static header rules, and may rewrite headers and body, answer the sandbox
 * themselves, or fail (502, audited).
 */
describe("request authorizers (extension point for cloud signing, tokens, callbacks)", () => {
  test("rewrite headers and body, answer directly, fail closed; static rules are visible to them", async (t) => {
    const up = await startUpstreams(t);
    const seen: OutboundRequest[] = [];
    const signer: RequestAuthorizer = {
      name: "fake-signer",
      async authorize(r) {
        seen.push(r);
        if (r.host.host !== "other.test") return { action: "pass" };
        const headers = r.headers.filter(([n]) => n.toLowerCase() !== "authorization");
        headers.push(["Authorization", `Signed ${r.method} ${r.target}`]);
        if (r.body) {
          headers.splice(
            headers.findIndex(([n]) => n.toLowerCase() === "content-length"),
            1,
          );
          return { action: "forward", headers, body: Readable.from([Buffer.from("replaced-body")]) };
        }
        return { action: "forward", headers, body: null };
      },
    };
    const responder: RequestAuthorizer = {
      name: "fake-responder",
      async authorize(r) {
        if (r.target.startsWith("/refuse"))
          return { action: "respond", status: 403, headers: { "x-reason": "test" }, body: "refused by engine" };
        if (r.target.startsWith("/boom")) throw new Error("engine exploded");
        return { action: "pass" };
      },
    };
    const p = await startProxy(
      t,
      up,
      {
        rules: [
          { name: "static", match_hosts: ["api.test"], headers: [{ name: "X-Static", type: "plaintext", value: "s" }] },
        ],
      },
      { authorizers: [signer, responder] },
    );
    let r = parseCurl(await curl(p, "https://other.test/x?q=1", ["-H", "Authorization: placeholder"]));
    assert.equal(r.json.headers.authorization, "Signed GET /x?q=1");
    r = parseCurl(await curl(p, "https://other.test/upload", ["--data-binary", "original"]));
    assert.equal(r.json.bodyBytes, "replaced-body".length);
    assert.equal(r.json.headers["transfer-encoding"], "chunked", "a replaced body of unknown length is framed");
    r = parseCurl(await curl(p, "https://api.test/refuse"));
    assert.equal(r.status, 403);
    assert.equal(r.body, "refused by engine");
    r = parseCurl(await curl(p, "https://api.test/boom"));
    assert.equal(r.status, 502);
    assert.ok(
      p.audit.events.some(
        (e) => e.kind === "credential" && e.rule === "fake-responder" && /exploded/.test(e.reason ?? ""),
      ),
    );
    r = parseCurl(await curl(p, "https://api.test/ok"));
    assert.equal(r.json.headers["x-static"], "s");
    assert.equal(seen.find((s) => s.target === "/ok")?.staticRule, "static");
    assert.equal(seen.find((s) => s.target === "/x?q=1")?.staticRule, null);
  });
});
