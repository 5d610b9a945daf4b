/**
 * Connections figures, each beside a baseline from the same run:
 *  - requests/s and p50 of `POST /v2/auth/authenticate` answering `completed` (lookup, lease-free
 *    freshness check, AES-GCM open) against `GET /v2/secrets` on the same server (auth + one query);
 *  - wall time for 20 concurrent readers of an expired token (one refresh at the provider, the rest
 *    wait on the row) against one reader refreshing alone.
 * Run: node bin/run-ts.js bench/connections-authenticate.ts [seconds-per-row] [sqlite|postgres]
 */
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import crypto from "node:crypto";
import pg from "pg";
import { loadConfig } from "../src/config/config.ts";
import { createConnectionsFeature } from "../src/connections/feature.ts";
import { identityFeature } from "../src/identity/routes.ts";
import { createLogger } from "../src/log/logger.ts";
import { secretsFeature } from "../src/secrets/routes.ts";
import { startPlatform } from "../src/platform/start-platform.ts";
import { Browser } from "../test/connections/support/browser.ts";
import { startMockAuthServer } from "../test/connections/support/mock-oauth.ts";

const SECONDS = Number(process.argv[2] ?? 5);
const DIALECT = process.argv[3] ?? "sqlite";
const CONCURRENCY = 8;
const PG_URL = process.env.WHARF_TEST_DATABASE_URL || "postgres://postgres@127.0.0.1:5432/test";
const AGENT = "6f1c2b3a-4d5e-4f60-8a7b-9c0d1e2f3a4b";

const cleanups: Array<() => Promise<unknown> | unknown> = [];
const fakeT = { after: (fn: () => unknown) => cleanups.push(fn) } as unknown as import("node:test").TestContext;

async function load(fn: () => Promise<Response>): Promise<{ rps: number; p50: number; errors: number }> {
  for (let i = 0; i < 100; i++) await (await fn()).arrayBuffer();
  const latencies: number[] = [];
  let errors = 0;
  const deadline = performance.now() + SECONDS * 1000;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (performance.now() < deadline) {
        const t0 = performance.now();
        const res = await fn();
        await res.arrayBuffer();
        if (res.status !== 200) errors++;
        latencies.push(performance.now() - t0);
      }
    }),
  );
  latencies.sort((a, b) => a - b);
  return {
    rps: latencies.length / ((performance.now() - started) / 1000),
    p50: latencies[Math.floor(latencies.length / 2)],
    errors,
  };
}

const home = fs.mkdtempSync(path.join(os.tmpdir(), "wharf-bench-conn-"));
const pgSchema = DIALECT === "postgres" ? `wharf_b_${crypto.randomBytes(5).toString("hex")}` : undefined;
const platform = await startPlatform(
  loadConfig({
    WHARF_HOME: home,
    WHARF_PORT: "0",
    WHARF_LOG_LEVEL: "warn",
    ...(pgSchema ? { DATABASE_URL: PG_URL } : {}),
  }),
  {
    log: createLogger({ level: "warn" }),
    pgSchema,
    features: [identityFeature, secretsFeature, createConnectionsFeature({ sweepIntervalSeconds: 0 })],
  },
);
const key = platform.bootstrap.apiKey!;
const headers = { "x-api-key": key, "content-type": "application/json" };
try {
  const mock = await startMockAuthServer(fakeT);
  await fetch(`${platform.url}/v2/auth/providers`, {
    method: "POST",
    headers,
    body: JSON.stringify(mock.providerBody("mock")),
  });
  const started = await (
    await fetch(`${platform.url}/v2/auth/authenticate`, {
      method: "POST",
      headers,
      body: JSON.stringify({ provider: "mock", scopes: ["a"], agent_id: AGENT }),
    })
  ).json();
  await new Browser().open(started.url);
  const body = JSON.stringify({ provider: "mock", scopes: ["a"], agent_id: AGENT });

  const baseline = await load(() => fetch(`${platform.url}/v2/secrets`, { headers }));
  const auth = await load(() => fetch(`${platform.url}/v2/auth/authenticate`, { method: "POST", headers, body }));
  console.log(`storage: ${DIALECT}, ${CONCURRENCY} concurrent clients, ${SECONDS} s per row`);
  console.log(
    `GET /v2/secrets (baseline)         ${baseline.rps.toFixed(0).padStart(6)} req/s  p50 ${baseline.p50.toFixed(2)} ms`,
  );
  console.log(
    `POST /v2/auth/authenticate (fresh) ${auth.rps.toFixed(0).padStart(6)} req/s  p50 ${auth.p50.toFixed(2)} ms  = ${(auth.rps / baseline.rps).toFixed(2)}x baseline throughput, errors ${auth.errors}`,
  );

  const tokenId = (await (await fetch(`${platform.url}/v2/auth/tokens`, { headers })).json())[0].id as string;
  const expire = () =>
    platform.ctx.db
      .updateTable("oauth_tokens")
      .set({ expires_at: new Date(Date.now() - 1000).toISOString() })
      .where("id", "=", tokenId)
      .execute();
  const read = () =>
    fetch(`${platform.url}/v2/auth/authenticate`, { method: "POST", headers, body }).then((r) => r.json());
  const rounds = 10;
  let alone = 0;
  let crowd = 0;
  for (let i = 0; i < rounds; i++) {
    await expire();
    let t0 = performance.now();
    await read();
    alone += performance.now() - t0;
    await expire();
    const before = mock.refreshRequests().length;
    t0 = performance.now();
    await Promise.all(Array.from({ length: 20 }, read));
    crowd += performance.now() - t0;
    if (mock.refreshRequests().length - before !== 1) throw new Error("more than one refresh for 20 readers");
  }
  console.log(`expired token, 1 reader (baseline)  ${(alone / rounds).toFixed(1).padStart(6)} ms per refresh`);
  console.log(
    `expired token, 20 readers           ${(crowd / rounds).toFixed(1).padStart(6)} ms for all = ${(crowd / alone).toFixed(2)}x one reader, 1 refresh each time`,
  );
} finally {
  await platform.stop();
  for (const c of cleanups.reverse()) await c();
  if (pgSchema) {
    const client = new pg.Client({ connectionString: PG_URL });
    await client.connect();
    await client.query(`DROP SCHEMA IF EXISTS "${pgSchema}" CASCADE`);
    await client.end();
  }
  fs.rmSync(home, { recursive: true, force: true });
}
