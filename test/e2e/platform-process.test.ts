import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { describe, test } from "node:test";
import { DIALECTS, storageSettings, tempHome } from "../support/dialects.ts";
import { freePort, runWharf, waitForOk, wharfCli } from "../support/process.ts";

function pgUrlWithSchema(url: string, schema: string): string {
  const u = new URL(url);
  u.searchParams.set("options", `-c search_path=${schema}`);
  return u.toString();
}

describe("the platform as a process", () => {
  test("first start prints the key once, writes it 0600; the CLI manages keys and secrets; SIGTERM drains", async (t) => {
    const cwd = tempHome("wharf-e2e-");
    const port = String(await freePort());
    const env = { WHARF_PORT: port };
    const up = runWharf(["up"], { cwd, env });
    t.after(() => up.child.kill("SIGKILL"));
    // A first start on a fresh home under a loaded full-suite run (how fast a restart answers is
    // the crash-recovery test's claim, not this one's).
    await waitForOk(`http://127.0.0.1:${port}/ok`, 60_000);
    const keyFile = path.join(cwd, ".wharf", "bootstrap-key");
    assert.equal(fs.statSync(keyFile).mode & 0o777, 0o600);
    const key = fs.readFileSync(keyFile, "utf8").trim();
    // Printed once start-up finishes (the API may answer a moment earlier).
    for (let i = 0; i < 200 && !up.output().includes(key); i++) await new Promise((r) => setTimeout(r, 50));
    assert.ok(up.output().includes(key), "the key is printed on first start");

    let res = await fetch(`http://127.0.0.1:${port}/v2/secrets`, { headers: { "X-Api-Key": key } });
    assert.equal(res.status, 200);
    res = await fetch(`http://127.0.0.1:${port}/v2/secrets`);
    assert.equal(res.status, 401);
    assert.ok((await res.json()).detail);

    let r = await wharfCli(["secrets", "set", "GITHUB_TOKEN", "ghp_example"], { cwd, env });
    assert.equal(r.code, 0, r.out);
    r = await wharfCli(["secrets", "list"], { cwd, env });
    assert.match(r.out, /GITHUB_TOKEN/);
    assert.ok(!r.out.includes("ghp_example"));
    r = await wharfCli(["keys", "create", "ci"], { cwd, env });
    assert.equal(r.code, 0, r.out);
    const [idLine, newKey] = r.out.trim().split("\n");
    const id = idLine.replace("created ", "");
    r = await wharfCli(["keys", "list"], { cwd, env });
    assert.match(r.out, /ci/);
    r = await wharfCli(["keys", "revoke", id], { cwd, env });
    assert.equal(r.code, 0, r.out);
    res = await fetch(`http://127.0.0.1:${port}/v2/secrets`, { headers: { "X-Api-Key": newKey } });
    assert.equal(res.status, 401);
    r = await wharfCli(["secrets", "rm", "NOPE"], { cwd, env });
    assert.equal(r.code, 1);
    assert.match(r.out, /404/);
    r = await wharfCli(["secrets", "rotate-key"], { cwd, env });
    assert.equal(r.code, 0, r.out);
    assert.match(r.out, /re-encrypted [1-9]\d* value/);
    assert.match(r.out, /dropped unused key/);
    res = await fetch(`http://127.0.0.1:${port}/v2/secrets`, { headers: { "X-Api-Key": key } });
    assert.equal((await res.json()).length, 1);

    up.child.kill("SIGTERM");
    assert.equal(await up.exited, 0);
    assert.match(up.output(), /shutting down/);

    // Second start: the key is not printed again.
    const again = runWharf(["up"], { cwd, env });
    t.after(() => again.child.kill("SIGKILL"));
    await waitForOk(`http://127.0.0.1:${port}/ok`);
    again.child.kill("SIGINT");
    assert.equal(await again.exited, 0);
    assert.ok(!again.output().includes(key));
  });

  test("a bad configuration or an unreachable database fails fast with a clear message", async () => {
    let r = await wharfCli(["up"], { cwd: tempHome(), env: { WHARF_PORT: "99999" } });
    assert.equal(r.code, 2);
    assert.match(r.out, /WHARF_PORT/);
    r = await wharfCli(["up"], {
      cwd: tempHome(),
      env: { WHARF_PORT: String(await freePort()), DATABASE_URL: "postgres://nobody@127.0.0.1:1/none" },
    });
    assert.equal(r.code, 1);
    assert.match(r.out, /cannot reach PostgreSQL at postgres:\/\/nobody@127\.0\.0\.1:1/);
  });

  for (const dialect of DIALECTS) {
    test(`SIGKILL loses no committed row (${dialect})`, async (t) => {
      const s = await storageSettings(t, dialect);
      if (!s) return;
      t.after(() => s.dropSchema());
      const port = String(await freePort());
      const env: Record<string, string> = { WHARF_PORT: port, WHARF_HOME: s.home };
      if (s.databaseUrl) env.DATABASE_URL = pgUrlWithSchema(s.databaseUrl, s.pgSchema!);
      if (s.pgSchema) {
        const pg = (await import("pg")).default;
        const c = new pg.Client({ connectionString: s.databaseUrl! });
        await c.connect();
        await c.query(`CREATE SCHEMA IF NOT EXISTS "${s.pgSchema}"`);
        await c.end();
      }
      const first = runWharf(["up"], { env });
      t.after(() => first.child.kill("SIGKILL"));
      await waitForOk(`http://127.0.0.1:${port}/ok`);
      const key = fs.readFileSync(path.join(s.home, "bootstrap-key"), "utf8").trim();
      const acknowledged: string[] = [];
      const writers = Array.from({ length: 4 }, async (_, w) => {
        for (let i = 0; i < 25; i++) {
          const k = `W${w}_${i}`;
          const res = await fetch(`http://127.0.0.1:${port}/v2/secrets`, {
            method: "PUT",
            headers: { "X-Api-Key": key },
            body: JSON.stringify([{ key: k, value: "v" }]),
          }).catch(() => null);
          if (res?.status === 200) acknowledged.push(k);
          if (w === 0 && i === 12) first.child.kill("SIGKILL");
        }
      });
      await Promise.all(writers);
      await first.exited;
      assert.ok(acknowledged.length >= 13, `only ${acknowledged.length} writes acknowledged`);

      const second = runWharf(["up"], { env });
      t.after(() => second.child.kill("SIGKILL"));
      await waitForOk(`http://127.0.0.1:${port}/ok`);
      const listed = (await (
        await fetch(`http://127.0.0.1:${port}/v2/secrets`, { headers: { "X-Api-Key": key } })
      ).json()) as Array<{ key: string }>;
      const present = new Set(listed.map((x) => x.key));
      const lost = acknowledged.filter((k) => !present.has(k));
      assert.deepEqual(lost, []);
      second.child.kill("SIGTERM");
      await second.exited;
    });
  }
});
