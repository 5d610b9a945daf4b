/**
 * Master-key rotation throughput: `rotateMasterKey` over N workspace secrets on SQLite and on
 * PostgreSQL (batches of 200, compare-and-set per row), beside a baseline from the same run: opening
 * and sealing the same N values in memory (the cryptography alone).
 * Run: node bin/run-ts.js bench/foundation-key-rotation.ts [N=5000]
 */
import crypto from "node:crypto";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import pg from "pg";
import { loadKeyring } from "../src/crypto/keyring.ts";
import { SecretBox } from "../src/crypto/secret-box.ts";
import { rotateMasterKey } from "../src/secrets/key-rotation.ts";
import { upsertSecrets } from "../src/secrets/secret-store.ts";
import { openStore, type Store } from "../src/store/database.ts";
import { migrateToLatest } from "../src/store/migrate.ts";
import { bootstrap } from "../src/platform/bootstrap.ts";

const N = Number(process.argv[2] ?? 5000);
const PG_URL = process.env.WHARF_TEST_DATABASE_URL || "postgres://postgres@127.0.0.1:5432/test";

async function measure(store: Store, home: string): Promise<number> {
  await migrateToLatest(store);
  const boot = await bootstrap(store.db, home);
  const box = new SecretBox(loadKeyring(home, null));
  for (let i = 0; i < N; i += 500) {
    await upsertSecrets(
      store.db,
      box,
      boot.workspaceId,
      Array.from({ length: Math.min(500, N - i) }, (_, j) => ({
        key: `S${i + j}`,
        value: crypto.randomBytes(24).toString("hex"),
      })),
    );
  }
  const t0 = performance.now();
  const r = await rotateMasterKey(store.db, { home, masterKey: null });
  const ms = performance.now() - t0;
  if (r.resealed !== N || r.kept.size) throw new Error(`resealed ${r.resealed} of ${N}`);
  return ms;
}

const sqliteHome = fs.mkdtempSync(path.join(os.tmpdir(), "wharf-bench-rot-"));
const sqliteStore = await openStore({ databaseUrl: null, home: sqliteHome });
const sqliteMs = await measure(sqliteStore, sqliteHome);
await sqliteStore.close();

const schema = `wharf_bench_rot_${process.pid}`;
const pgHome = fs.mkdtempSync(path.join(os.tmpdir(), "wharf-bench-rot-"));
const pgStore = await openStore({ databaseUrl: PG_URL, home: pgHome, pgSchema: schema });
const pgMs = await measure(pgStore, pgHome);
await pgStore.close();
const admin = new pg.Client({ connectionString: PG_URL });
await admin.connect();
await admin.query(`DROP SCHEMA ${schema} CASCADE`);
await admin.end();

// Baseline: the cryptography alone, same N values.
const box = new SecretBox(loadKeyring(fs.mkdtempSync(path.join(os.tmpdir(), "wharf-bench-rot-")), null));
const sealed = Array.from({ length: N }, (_, i) =>
  box.seal(crypto.randomBytes(24).toString("hex"), `workspace-secret:w:S${i}`),
);
const t0 = performance.now();
sealed.forEach((s, i) => box.seal(box.open(s, `workspace-secret:w:S${i}`), `workspace-secret:w:S${i}`));
const cryptoMs = performance.now() - t0;

console.log(`\nMaster-key rotation of ${N} sealed values, ${os.cpus().length} cores\n`);
console.log("row                               ms   values/s   vs crypto alone");
for (const [name, ms] of [
  ["rotate-key, SQLite", sqliteMs],
  ["rotate-key, PostgreSQL", pgMs],
  ["open + seal in memory", cryptoMs],
] as const) {
  console.log(
    `${name.padEnd(28)}${ms.toFixed(0).padStart(8)}${((N / ms) * 1000).toFixed(0).padStart(11)}${(ms / cryptoMs).toFixed(1).padStart(12)}x`,
  );
}
fs.rmSync(sqliteHome, { recursive: true, force: true });
fs.rmSync(pgHome, { recursive: true, force: true });
