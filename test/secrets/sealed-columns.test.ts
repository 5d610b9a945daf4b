import assert from "node:assert/strict";
import { describe, test } from "node:test";
import {
  accessTokenAad,
  authorizeUrlAad,
  clientSecretAad,
  pkceVerifierAad,
  refreshTokenAad,
} from "../../src/connections/sealed-columns.ts";
import { apiKeyAad, secretsAad } from "../../src/deployments/store/deployment-secrets.ts";
import { dbPasswordAad } from "../../src/deployments/runtime/database-access.ts";
import { agentKeyAad } from "../../src/deployments/runtime/revision-runtime.ts";
import { envAad } from "../../src/sandboxes/store/sandbox-store.ts";
import { aadOf, SEALED_LOCATIONS } from "../../src/secrets/sealed-columns.ts";
import { secretAad } from "../../src/secrets/secret-store.ts";
import { DIALECTS, openTestStore } from "../support/dialects.ts";

/** Column names that hold a sealed value by the naming rule the registry's header states. */
const LOOKS_SEALED = /(_cipher|ciphertext|_sealed)$/;

for (const dialect of DIALECTS) {
  describe(`sealed-column registry against the migrated schema (${dialect})`, () => {
    test("every column named like a sealed value is listed, and every listed column exists", async (t) => {
      const s = await openTestStore(t, dialect);
      if (!s) return;
      t.after(() => s.cleanup());
      const tables = (await s.store.db.introspection.getTables()).filter(
        (tb) => dialect === "sqlite" || tb.schema === s.pgSchema,
      );
      const columns = new Map(tables.map((tb) => [tb.name, new Set(tb.columns.map((c) => c.name))]));
      const listed = new Set(
        SEALED_LOCATIONS.flatMap((l) => (l.kind === "column" ? [`${l.table}.${l.cipherColumn}`] : [])),
      );
      const missing: string[] = [];
      for (const [table, cols] of columns)
        for (const c of cols) if (LOOKS_SEALED.test(c) && !listed.has(`${table}.${c}`)) missing.push(`${table}.${c}`);
      assert.deepEqual(
        missing,
        [],
        "add these to SEALED_LOCATIONS in src/secrets/sealed-columns.ts so that key rotation re-encrypts them",
      );
      for (const l of SEALED_LOCATIONS) {
        const cols = columns.get(l.table);
        assert.ok(cols, `${l.name}: table ${l.table} exists`);
        const needed = [
          ...l.keyColumns,
          ...l.aad.columns,
          ...(l.kind === "column" ? [l.keyIdColumn, l.cipherColumn] : [l.jsonColumn]),
        ];
        for (const c of needed) assert.ok(cols.has(c), `${l.name}: column ${l.table}.${c} exists`);
      }
    });
  });
}

describe("sealed-column registry against the features' associated data", () => {
  const byName = (name: string) => SEALED_LOCATIONS.find((l) => l.name === name)!;
  const cases: Array<[string, (a: string, b: string) => string]> = [
    ["secrets.value", (ws, key) => secretAad(ws, key)],
    ["connections.client-secret", clientSecretAad],
    ["connections.access-token", accessTokenAad],
    ["connections.refresh-token", refreshTokenAad],
    ["connections.pkce-verifier", pkceVerifierAad],
    ["connections.authorize-url", authorizeUrlAad],
    ["deployments.secrets", secretsAad],
    ["deployments.api-key", apiKeyAad],
    ["deployments.agent-key", agentKeyAad],
    ["deployments.db-password", dbPasswordAad],
    ["sandboxes.env", envAad],
  ];
  for (const [name, feature] of cases) {
    test(name, () => {
      const l = byName(name);
      const values = Object.fromEntries(l.aad.columns.map((c, i) => [c, `v${i}`]));
      assert.equal(aadOf(l, values), feature("v0", "v1"));
    });
  }
  test("names are unique", () =>
    assert.equal(new Set(SEALED_LOCATIONS.map((l) => l.name)).size, SEALED_LOCATIONS.length));
});
