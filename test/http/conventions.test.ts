import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { startTestPlatform } from "../support/platform.ts";

describe("HTTP conventions", () => {
  test("/ok, JSON 404s, the /api/v2 alias and the reserved /v1", async (t) => {
    const p = (await startTestPlatform(t))!;
    let res = await fetch(p.url + "/ok");
    assert.equal(res.status, 200);
    assert.deepEqual(await res.json(), { ok: true });
    assert.match(res.headers.get("x-request-id") ?? "", /.+/);

    res = await fetch(p.url + "/nope");
    assert.equal(res.status, 404);
    assert.match((await res.json()).detail, /Not found/);

    res = await p.api("/v2/does-not-exist");
    assert.equal(res.status, 404);
    assert.equal(typeof (await res.json()).detail, "string");

    res = await p.api("/api/v2/secrets");
    assert.equal(res.status, 200);
    res = await p.api("/v1/secrets");
    assert.equal(res.status, 404);
  });

  test("credentials: none, bad key, tenant alone are 401 with a JSON detail", async (t) => {
    const p = (await startTestPlatform(t))!;
    for (const headers of [
      {},
      { "x-api-key": "wharf_nope" },
      { "x-api-key": "" },
      { "x-tenant-id": p.bootstrap.workspaceId },
      { authorization: "Bearer not.a.jwt" },
      { authorization: "Basic Zm9vOmJhcg==" },
    ] as Array<Record<string, string>>) {
      const res = await fetch(p.url + "/v2/secrets", { headers });
      assert.equal(res.status, 401, JSON.stringify(headers));
      assert.equal(typeof (await res.json()).detail, "string");
    }
  });

  test("validation errors are FastAPI-shaped with loc starting at body, query or path", async (t) => {
    const p = (await startTestPlatform(t))!;
    let res = await p.api("/v2/secrets", {
      method: "PUT",
      body: "{not json",
      headers: { "content-type": "application/json" },
    });
    assert.equal(res.status, 422);
    let body = await res.json();
    assert.equal(body.detail[0].type, "json_invalid");
    assert.equal(body.detail[0].loc[0], "body");

    res = await p.api("/v2/secrets", { method: "PUT", json: { key: "A", value: "x" } });
    assert.equal(res.status, 422);
    body = await res.json();
    assert.deepEqual(body.detail[0].loc, ["body"]);

    res = await p.api("/v2/secrets", {
      method: "PUT",
      json: [
        { key: "A", value: 3 },
        { key: "A", value: "y", extra: 1 },
      ],
    });
    body = await res.json();
    assert.equal(res.status, 422);
    for (const item of body.detail) {
      assert.deepEqual(Object.keys(item).sort(), ["loc", "msg", "type"]);
      assert.equal(item.loc[0], "body");
    }
    assert.ok(
      body.detail.some((d: { loc: unknown[] }) => JSON.stringify(d.loc) === JSON.stringify(["body", 0, "value"])),
    );
    assert.ok(body.detail.some((d: { type: string }) => d.type === "extra_forbidden"));

    res = await p.api("/v2/api-keys/not-a-uuid", { method: "DELETE" });
    assert.equal(res.status, 422);
    assert.deepEqual((await res.json()).detail[0].loc, ["path", "key_id"]);

    res = await p.api("/v2/secrets", {
      method: "PUT",
      json: [
        { key: "A", value: "1" },
        { key: "A", value: "2" },
      ],
    });
    assert.equal(res.status, 422);
    assert.equal((await res.json()).detail[0].type, "value_error");
  });

  test("an oversize body is 413 with a detail", async (t) => {
    const p = (await startTestPlatform(t, { env: { WHARF_BODY_LIMIT_BYTES: "2048" } }))!;
    const res = await p.api("/v2/secrets", { method: "PUT", json: [{ key: "BIG", value: "x".repeat(5000) }] });
    assert.equal(res.status, 413);
    assert.match((await res.json()).detail, /too large/);
  });

  test("OpenAPI 3.1 document and interactive docs", async (t) => {
    const p = (await startTestPlatform(t))!;
    const doc = await (await fetch(p.url + "/openapi.json")).json();
    assert.equal(doc.openapi, "3.1.0");
    assert.equal(doc.info.version, "0.1.0");
    assert.ok(doc.paths["/v2/secrets"].put.requestBody);
    assert.ok(doc.paths["/v2/secrets/{key}"].delete);
    assert.ok(doc.components.securitySchemes.ApiKey);
    const page = await fetch(p.url + "/docs");
    const html = await page.text();
    assert.match(html, /swagger-ui-bundle\.js/);
    // On the console's origin: no inline script, no framing.
    assert.doesNotMatch(html, /<script>/);
    assert.match(page.headers.get("content-security-policy")!, /script-src 'self';.*frame-ancestors 'none'/);
    assert.equal(page.headers.get("x-frame-options"), "DENY");
    assert.match(await (await fetch(p.url + "/docs/init.js")).text(), /SwaggerUIBundle\(\{ url: "\/openapi.json"/);
    const js = await fetch(p.url + "/docs/swagger-ui-bundle.js");
    assert.equal(js.status, 200);
    await js.arrayBuffer();
  });
});

describe("validation error types", () => {
  test("a present value of the wrong type is *_type, an absent one is missing", async (t) => {
    const p = (await startTestPlatform(t))!;
    let res = await p.api("/v2/secrets", { method: "PUT", json: { a: 1 } });
    assert.deepEqual((await res.json()).detail, [
      { loc: ["body"], msg: "Input should be a valid list", type: "list_type" },
    ]);
    res = await p.api("/v2/secrets", { method: "PUT", json: [{ key: "K" }] });
    assert.deepEqual((await res.json()).detail, [
      { loc: ["body", 0, "value"], msg: "Field required", type: "missing" },
    ]);
    res = await p.api("/v2/secrets", { method: "PUT", json: [{ key: "K", value: null }] });
    assert.deepEqual((await res.json()).detail, [
      { loc: ["body", 0, "value"], msg: "Input should be a valid string", type: "string_type" },
    ]);
  });
});
