import assert from "node:assert/strict";
import { test } from "node:test";
import { curl, parseCurl, startProxy } from "./support/proxy.ts";
import { hostsSetting, startUpstreams } from "./support/upstreams.ts";

test("an unexpected error in one request's handling answers 502 with a request id; the next request works", async (t) => {
  const up = await startUpstreams(t, ["api.test"]);
  let explode = true;
  const authorizer = {
    name: "flaky",
    authorize: async () => ({ action: "pass" as const }),
    // A bug in an engine's synchronous path, not an engine failure the proxy expects.
    answerLocally: () => {
      if (explode) throw new TypeError("cannot read properties of undefined");
      return null;
    },
  };
  const p = await startProxy(
    t,
    up,
    { rules: [] },
    { env: { WHARF_EGRESS_HOSTS: hostsSetting(up, ["api.test"]) }, authorizers: [authorizer] },
  );
  const r = parseCurl(await curl(p, "http://api.test/x", ["-D", "-"]));
  assert.equal(r.status, 502);
  assert.match(r.body, /egress: internal error \(request id [0-9a-f-]{36}\)/);
  assert.match(r.body, /x-request-id: [0-9a-f-]{36}/i);
  explode = false;
  assert.equal(parseCurl(await curl(p, "http://api.test/x")).status, 200);
});

test("the fault hook is off by default: the header is an ordinary header", async (t) => {
  const up = await startUpstreams(t, ["api.test"]);
  const p = await startProxy(t, up, { rules: [] }, { env: { WHARF_EGRESS_HOSTS: hostsSetting(up, ["api.test"]) } });
  const r = parseCurl(await curl(p, "http://api.test/x", ["-H", "x-wharf-egress-fault: crash"]));
  assert.equal(r.status, 200);
  assert.equal(r.json.headers["x-wharf-egress-fault"], "crash");
});
