import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { describe, test } from "node:test";
import pg from "pg";
import { loadKeyring, reloadKeyring, addActiveKey } from "../../src/crypto/keyring.ts";
import { SecretBox } from "../../src/crypto/secret-box.ts";
import { resealAll } from "../../src/secrets/rotate-master-key.ts";
import { readSecretValues } from "../../src/secrets/secret-store.ts";
import { DIALECTS } from "../support/dialects.ts";
import { startTestPlatform } from "../support/platform.ts";

const PLANTED = "planted-Secret-Value-4f1c9b2e7d";

for (const dialect of DIALECTS) {
  describe(`secrets at rest (${dialect})`, () => {
    test("a planted value appears in no response, no log line and nowhere in the database in plain text", async (t) => {
      const p = await startTestPlatform(t, { dialect });
      if (!p) return;
      const responses: string[] = [];
      const record = async (res: Response) => responses.push(await res.text());
      await record(await p.api("/v2/secrets", { method: "PUT", json: [{ key: "PLANTED", value: PLANTED }] }));
      await record(await p.api("/v2/secrets"));
      await record(
        await p.api("/v2/secrets", { method: "PUT", json: [{ key: "PLANTED", value: PLANTED, oops: true }] }),
      );
      await record(await p.api("/v2/secrets", { method: "PUT", json: [{ key: "1bad", value: PLANTED }] }));
      await record(
        await p.api("/v2/secrets", {
          method: "PUT",
          body: `[{"key":"X","value":"${PLANTED}"`,
          headers: { "content-type": "application/json" },
        }),
      );
      for (const r of responses) assert.ok(!r.includes(PLANTED), `response leaked: ${r}`);
      assert.ok(!p.logs().includes(PLANTED), "logs leaked the secret");

      const values = await readSecretValues(p.ctx.db, p.ctx.box, p.bootstrap.workspaceId, ["PLANTED"]);
      assert.equal(values.get("PLANTED"), PLANTED, "the value is stored and opens");

      if (dialect === "sqlite") {
        await p.stop();
        for (const f of fs.readdirSync(p.home, { recursive: true }) as string[]) {
          const file = path.join(p.home, f);
          if (!fs.lstatSync(file).isFile() || f.startsWith("sandboxes/images")) continue;
          assert.ok(!fs.readFileSync(file).includes(Buffer.from(PLANTED)), `${f} holds the plain value`);
        }
      } else {
        const dump = execFileSync("pg_dump", ["--data-only", "--schema", p.pgSchema!, p.databaseUrl!], {
          encoding: "utf8",
          maxBuffer: 64 << 20,
        });
        assert.match(dump, /COPY .*secrets/);
        assert.ok(!dump.includes(PLANTED), "PostgreSQL tables hold the plain value");
      }
    });

    test("rotate-key re-encrypts every secret under the new key and they still open", async (t) => {
      const p = await startTestPlatform(t, { dialect });
      if (!p) return;
      await p.api("/v2/secrets", {
        method: "PUT",
        json: [
          { key: "A", value: "a-value" },
          { key: "B", value: "b-value" },
        ],
      });
      const before = await p.ctx.db.selectFrom("secrets").select(["key", "key_id"]).execute();
      addActiveKey(p.home);
      const box = new SecretBox(loadKeyring(p.home, null), () => reloadKeyring(p.home, null));
      const { resealed } = await resealAll(p.ctx.db, box);
      assert.equal(resealed, 2);
      const after = await p.ctx.db.selectFrom("secrets").select(["key", "key_id"]).execute();
      assert.ok(after.every((r) => r.key_id === box.activeKeyId && r.key_id !== before[0].key_id));
      // The running server, still holding the old keyring, reads values sealed under the new key.
      const values = await readSecretValues(p.ctx.db, p.ctx.box, p.bootstrap.workspaceId, ["A", "B"]);
      assert.deepEqual([...values.values()].sort(), ["a-value", "b-value"]);
    });

    test("concurrent writers on the same keys lose nothing and never fail", async (t) => {
      const p = await startTestPlatform(t, { dialect });
      if (!p) return;
      const writes = Array.from({ length: 40 }, (_, i) =>
        p.api("/v2/secrets", {
          method: "PUT",
          json: [
            { key: `K${i % 5}`, value: `v${i}` },
            { key: `U${i}`, value: "u" },
          ],
        }),
      );
      const statuses = (await Promise.all(writes)).map((r) => r.status);
      assert.deepEqual([...new Set(statuses)], [200]);
      const listed = await (await p.api("/v2/secrets")).json();
      assert.equal(listed.length, 45);
    });
  });
}

test("pg client is importable for the dump helper", () => assert.ok(pg.Client));
