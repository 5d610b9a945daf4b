import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { DIALECTS } from "../support/dialects.ts";
import { startTestPlatform } from "../support/platform.ts";

for (const dialect of DIALECTS) {
  describe(`workspace secrets API (${dialect})`, () => {
    test("upsert, list without values, delete", async (t) => {
      const p = await startTestPlatform(t, { dialect });
      if (!p) return;
      let res = await p.api("/v2/secrets", {
        method: "PUT",
        json: [
          { key: "OPENAI_API_KEY", value: "sk-one" },
          { key: "B", value: "b" },
        ],
      });
      assert.equal(res.status, 200);
      const written = await res.json();
      assert.deepEqual(
        written.map((s: { key: string }) => s.key),
        ["B", "OPENAI_API_KEY"],
      );
      res = await p.api("/v2/secrets", { method: "PUT", json: [{ key: "OPENAI_API_KEY", value: "sk-two" }] });
      assert.equal(res.status, 200);
      res = await p.api("/v2/secrets");
      const listed = await res.json();
      assert.equal(listed.length, 2);
      for (const s of listed) assert.deepEqual(Object.keys(s).sort(), ["created_at", "key", "updated_at"]);
      res = await p.api("/v2/secrets/B", { method: "DELETE" });
      assert.equal(res.status, 204);
      res = await p.api("/v2/secrets/B", { method: "DELETE" });
      assert.equal(res.status, 404);
      assert.deepEqual(await res.json(), { detail: "Secret not found" });
    });
  });
}

for (const dialect of DIALECTS) {
  test(`listing an empty selection of secrets answers nothing, without a query error (${dialect})`, async (t) => {
    const p = await startTestPlatform(t, { dialect });
    if (!p) return;
    const { listSecrets } = await import("../../src/secrets/secret-store.ts");
    assert.deepEqual(await listSecrets(p.ctx.db, p.bootstrap.workspaceId, []), []);
  });
}
