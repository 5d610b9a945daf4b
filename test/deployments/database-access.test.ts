import assert from "node:assert/strict";
import net from "node:net";
import { describe, test } from "node:test";
import pg from "pg";
import {
  deploymentDatabaseNames,
  dropPlan,
  ensureDeploymentDatabase,
  legacyDatabaseNames,
  provisionPlan,
  roleUrl,
  upstreamOf,
} from "../../src/deployments/runtime/database-access.ts";
import { startTestPlatform } from "../support/platform.ts";
import { POSTGRES_URL } from "../support/requirements.ts";
import {
  admitStartup,
  DatabaseForwarder,
  errorResponse,
  parseFirstMessage,
} from "../../src/deployments/runtime/database-forwarder.ts";
import { LocalServers, soleServer, type OtherRevision } from "../../src/deployments/rollout/sole-server.ts";
import { signalChannel } from "../../src/agent-server/runs/run-signals.ts";

/** A StartupMessage as a client sends it: length, protocol 3.0, key/value pairs, final NUL. */
function startup(params: Record<string, string>): Buffer {
  const body = Buffer.from(
    Object.entries(params)
      .map(([k, v]) => `${k}\0${v}\0`)
      .join("") + "\0",
  );
  const head = Buffer.alloc(8);
  head.writeInt32BE(body.length + 8, 0);
  head.writeInt32BE(196608, 4);
  return Buffer.concat([head, body]);
}

/** The same message one byte shorter, its length field adjusted. */
function withoutFinalNul(msg: Buffer): Buffer {
  const cut = Buffer.from(msg.subarray(0, msg.length - 1));
  cut.writeInt32BE(cut.length, 0);
  return cut;
}

function request(code: number, length = 8): Buffer {
  const b = Buffer.alloc(length);
  b.writeInt32BE(length, 0);
  b.writeInt32BE(code, 4);
  return b;
}

describe("the database forwarder's first-message decision", () => {
  const full = startup({ user: "wharf_dep_a", database: "test", application_name: "x" });
  const cases: Array<[string, Buffer, string]> = [
    ["nothing yet", Buffer.alloc(3), "incomplete"],
    ["a partial startup message", full.subarray(0, full.length - 2), "incomplete"],
    ["a whole startup message", full, "startup"],
    ["a startup message and the first query behind it", Buffer.concat([full, Buffer.from("Q")]), "startup"],
    ["TLS negotiation", request(80877103), "ssl"],
    ["GSS negotiation", request(80877104), "gssenc"],
    ["a cancel request", request(80877102, 16), "cancel"],
    ["protocol 2", request(131072), "invalid"],
    [
      "a huge length",
      (() => {
        const b = request(196608);
        b.writeInt32BE(1 << 20, 0);
        return b;
      })(),
      "invalid",
    ],
    ["parameters without the final NUL", withoutFinalNul(startup({ user: "a" })), "invalid"],
    [
      "a key without its value",
      withoutFinalNul(Buffer.concat([startup({ user: "a" }).subarray(0, -1), Buffer.from("k\0\0")])),
      "invalid",
    ],
  ];
  for (const [name, buf, kind] of cases) test(name, () => assert.equal(parseFirstMessage(buf).kind, kind));

  test("parameters are read", () => {
    const m = parseFirstMessage(full);
    assert.ok(m.kind === "startup");
    assert.deepEqual(m.params, { user: "wharf_dep_a", database: "test", application_name: "x" });
  });

  const target = { user: "wharf_dep_a", database: "test" };
  const admits: Array<[string, Record<string, string>, boolean]> = [
    ["its role and database", { user: "wharf_dep_a", database: "test" }, true],
    ["another role", { user: "postgres", database: "test" }, false],
    ["another deployment's role", { user: "wharf_dep_b", database: "test" }, false],
    ["another database", { user: "wharf_dep_a", database: "postgres" }, false],
    ["no database: PostgreSQL would use the role's name", { user: "wharf_dep_a" }, false],
    ["no user", { database: "test" }, false],
    ["replication", { user: "wharf_dep_a", database: "test", replication: "database" }, false],
    ["replication off", { user: "wharf_dep_a", database: "test", replication: "false" }, true],
  ];
  for (const [name, params, ok] of admits)
    test(`admit: ${name}`, () => assert.equal(admitStartup(params, target).ok, ok));

  test("an ErrorResponse is framed as PostgreSQL frames it", () => {
    const b = errorResponse("28000", "no");
    assert.equal(b.subarray(0, 1).toString(), "E");
    assert.equal(b.readInt32BE(1), b.length - 1);
    assert.equal(b.at(-1), 0);
    assert.match(b.toString("latin1"), /C28000\0Mno\0\0$/);
  });
});

describe("a deployment's database plan", () => {
  test("names: a hash of the id (every role sees every role name), the id-named ones of before renamed", () => {
    const names = deploymentDatabaseNames("01a20aba-8faa-7197-8313-f8c051e2a849");
    assert.match(names.role, /^wharf_dep_[0-9a-f]{32}$/);
    assert.equal(names.schema, names.role);
    assert.ok(!names.role.includes("01a20aba8faa71978313f8c051e2a849"));
    assert.match(deploymentDatabaseNames('x"; drop table y').role, /^wharf_dep_[0-9a-f]{32}$/);
    assert.deepEqual(legacyDatabaseNames("01a20aba-8faa-7197-8313-f8c051e2a849"), {
      role: "wharf_dep_01a20aba8faa71978313f8c051e2a849",
      schema: "wharf_dep_01a20aba8faa71978313f8c051e2a849",
    });
    assert.equal(legacyDatabaseNames('x"; drop table y'), null);
    const sqls = provisionPlan({ ...base, legacy: { role: "wharf_dep_old", schema: "wharf_dep_old" } }).map(
      (s) => s.sql,
    );
    assert.deepEqual(sqls.slice(0, 2), [
      'ALTER ROLE "wharf_dep_old" RENAME TO "wharf_dep_a"',
      'ALTER SCHEMA "wharf_dep_old" RENAME TO "wharf_dep_a"',
    ]);
  });

  const base = {
    role: "wharf_dep_a",
    schema: "wharf_dep_a",
    password: "pw'x",
    database: "test",
    platformSchema: "wharf_t_1",
    platformIsSuperuser: true,
    limits: { statementTimeoutSeconds: 300, tempFileLimitBytes: 1024 ** 3 },
  };
  const cases: Array<[string, Partial<typeof base>, RegExp[], RegExp[]]> = [
    [
      "a superuser platform in its own schema",
      {},
      [
        /^CREATE ROLE "wharf_dep_a" LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOINHERIT NOREPLICATION NOBYPASSRLS CONNECTION LIMIT \d+ PASSWORD 'pw''x'$/,
        /^ALTER ROLE "wharf_dep_a" SET statement_timeout = 300000$/,
        /^ALTER ROLE "wharf_dep_a" SET idle_in_transaction_session_timeout = 300000$/,
        /^ALTER ROLE "wharf_dep_a" SET temp_file_limit = 1048576$/,
        /^ALTER ROLE "wharf_dep_a" SET search_path = "wharf_dep_a"$/,
        /^CREATE SCHEMA IF NOT EXISTS "wharf_dep_a" AUTHORIZATION "wharf_dep_a"$/,
        /^REVOKE ALL ON SCHEMA "wharf_dep_a" FROM PUBLIC$/,
        /^REVOKE CREATE ON SCHEMA "wharf_t_1" FROM PUBLIC$/,
        /^REVOKE CREATE ON SCHEMA "public" FROM PUBLIC$/,
      ],
      [/^GRANT "wharf_dep_a" TO/, /GRANT .* ON .*"wharf_t_1"/],
    ],
    ["a platform in public", { platformSchema: "public" }, [/^REVOKE CREATE ON SCHEMA "public" FROM PUBLIC$/], []],
    [
      "a platform role that is not a superuser becomes a member",
      { platformIsSuperuser: false },
      [/^GRANT "wharf_dep_a" TO CURRENT_USER$/],
      [],
    ],
  ];
  for (const [name, over, present, absent] of cases) {
    test(name, () => {
      const sqls = provisionPlan({ ...base, ...over }).map((s) => s.sql);
      for (const re of present)
        assert.ok(
          sqls.some((s) => re.test(s)),
          `${re} in\n${sqls.join("\n")}`,
        );
      for (const re of absent) assert.ok(!sqls.some((s) => re.test(s)), `${re} not in\n${sqls.join("\n")}`);
      assert.equal(sqls.filter((s) => /REVOKE CREATE ON SCHEMA "public"/.test(s)).length, 1);
    });
  }
  test("unsafe names are refused rather than quoted", () =>
    assert.throws(() => provisionPlan({ ...base, role: 'a"b' }), /not a safe PostgreSQL name/));
  test("drop: sessions, schema, what the role owns, the role", () => {
    assert.deepEqual(
      dropPlan({ role: "wharf_dep_a", schema: "wharf_dep_a" }).map((s) => s.sql.split(" ").slice(0, 2).join(" ")),
      ["SELECT pg_terminate_backend(pid)", "DROP SCHEMA", "DROP OWNED", "DROP ROLE"],
    );
  });
  const urls: Array<[string, ReturnType<typeof upstreamOf>]> = [
    ["postgres://root@127.0.0.1:5432/test", { host: "127.0.0.1", port: 5432 }],
    ["postgresql://u:p@db.example:6432/x", { host: "db.example", port: 6432 }],
    ["postgres://u@[::1]/x", { host: "::1", port: 5432 }],
    ["postgres:///test?host=/var/run/postgresql", { path: "/var/run/postgresql/.s.PGSQL.5432" }],
  ];
  for (const [url, expected] of urls) test(`upstream of ${url}`, () => assert.deepEqual(upstreamOf(url), expected));
});

describe("the forwarder on a socket", () => {
  test("refuses another role with a PostgreSQL error and pipes the admitted one", async (t) => {
    // A stand-in PostgreSQL that echoes what it receives.
    const upstream = net.createServer((s) => s.pipe(s));
    await new Promise<void>((r) => upstream.listen(0, "127.0.0.1", r));
    const listener = net.createServer();
    await new Promise<void>((r) => listener.listen(0, "127.0.0.1", r));
    const refused: string[] = [];
    const fwd = new DatabaseForwarder(
      { host: "127.0.0.1", port: (upstream.address() as net.AddressInfo).port },
      { user: "wharf_dep_a", database: "test" },
      (r) => refused.push(r),
    );
    fwd.attach(listener);
    t.after(() => {
      fwd.close();
      upstream.close();
    });
    const port = (listener.address() as net.AddressInfo).port;
    const exchange = (chunks: Buffer[], until: (b: Buffer) => boolean) =>
      new Promise<Buffer>((resolve) => {
        const s = net.connect(port, "127.0.0.1");
        let got = Buffer.alloc(0);
        s.on("data", (d) => {
          got = Buffer.concat([got, d]);
          if (until(got)) s.destroy();
        });
        s.on("close", () => resolve(got));
        for (const c of chunks) s.write(c);
      });
    const denied = await exchange([startup({ user: "postgres", database: "test" })], () => false);
    assert.equal(denied.subarray(0, 1).toString(), "E");
    assert.match(denied.toString("latin1"), /C28000/);
    assert.equal(refused.length, 1);
    const hello = startup({ user: "wharf_dep_a", database: "test" });
    // TLS is declined ("N"), then the startup message and what follows reach the server unchanged.
    const echoed = await exchange(
      [request(80877103), hello.subarray(0, 5), Buffer.concat([hello.subarray(5), Buffer.from("Q")])],
      (b) => b.length >= 1 + hello.length + 1,
    );
    assert.deepEqual(echoed, Buffer.concat([Buffer.from("N"), hello, Buffer.from("Q")]));
  });
});

describe("--exclusive: the only server of a deployment's storage", () => {
  const now = "2026-01-01T00:00:10.000Z";
  const other = (o: Partial<OtherRevision>): OtherRevision => ({
    runningHere: false,
    owner: null,
    leaseUntil: null,
    hasServer: false,
    ...o,
  });
  const cases: Array<[string, OtherRevision[], boolean]> = [
    ["no other revision", [], true],
    ["a replaced revision still draining here", [other({ runningHere: true, owner: "me", hasServer: true })], false],
    [
      "ours in the database but not running here (our previous process)",
      [other({ owner: "me", hasServer: true, leaseUntil: "2026-01-01T00:00:20.000Z" })],
      true,
    ],
    [
      "another process serves one under a live lease",
      [other({ owner: "node-b", hasServer: true, leaseUntil: "2026-01-01T00:00:20.000Z" })],
      false,
    ],
    [
      "another process's lease ran out (it died, its servers with it)",
      [other({ owner: "node-b", hasServer: true, leaseUntil: "2026-01-01T00:00:05.000Z" })],
      true,
    ],
    [
      "another process builds one (no server yet)",
      [other({ owner: "node-b", hasServer: false, leaseUntil: "2026-01-01T00:00:20.000Z" })],
      true,
    ],
    ["an old revision nobody owns", [other({ owner: null })], true],
  ];
  for (const [name, others, expected] of cases) test(name, () => assert.equal(soleServer(others, "me", now), expected));
});

describe("--exclusive: starts of one deployment in one platform process take turns", () => {
  const now = "2026-01-01T00:00:10.000Z";
  /** Whether a promise has settled after the microtasks queued so far. */
  const settled = async (p: Promise<unknown>) => {
    let done = false;
    p.then(
      () => (done = true),
      () => (done = true),
    );
    await new Promise((r) => setImmediate(r));
    return done;
  };
  const sole = (s: { others(): OtherRevision[] }) => soleServer(s.others(), "me", now);

  test("a revision served again and a rollout resuming beside it: exactly one starts exclusive, the second after the first answered /ok", async () => {
    const here = new LocalServers();
    const served = here.begin("dep", "rev-1");
    const rollout = here.begin("dep", "rev-2");
    assert.equal(await served.turn(), true);
    assert.equal(sole(served), true, "the first start has nothing before it");
    const turn = rollout.turn();
    assert.equal(
      await settled(turn),
      false,
      "the second waits while the first starts (and settles the abandoned runs)",
    );
    served.up();
    assert.equal(await turn, true);
    assert.equal(sole(rollout), false, "the first still runs: the second is not alone");
  });

  test("a start that failed (or a server that exited) lets the next one go and no longer counts", async () => {
    const here = new LocalServers();
    const a = here.begin("dep", "rev-1");
    const b = here.begin("dep", "rev-2");
    a.end();
    assert.equal(await settled(b.turn()), true);
    assert.equal(sole(b), true);
    assert.equal(here.count("dep"), 1);
  });

  test("a replaced server still draining here counts for a later start, which does not wait for it again", async () => {
    const here = new LocalServers();
    const old = here.begin("dep", "rev-1");
    old.up();
    const next = here.begin("dep", "rev-2");
    assert.equal(await settled(next.turn()), true);
    assert.equal(sole(next), false);
    old.end();
    assert.equal(sole(next), true, "once it exited, nothing else runs");
  });

  test("another deployment's starts neither wait nor count", async () => {
    const here = new LocalServers();
    here.begin("dep-a", "rev-1");
    const b = here.begin("dep-b", "rev-2");
    assert.equal(await settled(b.turn()), true);
    assert.equal(sole(b), true);
  });

  test("a start before it that never answers is waited for only so long, and still counts", async () => {
    const here = new LocalServers(20);
    here.begin("dep", "rev-broken");
    const b = here.begin("dep", "rev-active");
    assert.equal(await b.turn(), false);
    assert.equal(sole(b), false);
  });

  test("a start whose phase is aborted while it waits gives up its turn", async () => {
    const here = new LocalServers();
    here.begin("dep", "rev-1");
    const b = here.begin("dep", "rev-2");
    const ac = new AbortController();
    const turn = b.turn(ac.signal);
    ac.abort(new Error("deploy deadline"));
    await assert.rejects(turn, /deploy deadline/);
  });
});

describe("cross-process cancel channels on a shared PostgreSQL", () => {
  test("a deployment's channel is named from its agent key: others can neither listen to it nor send on it", () => {
    assert.equal(signalChannel("project:x"), "wharf_agent_run_cancel");
    const a = signalChannel("dep-a", "key-a");
    assert.match(a, /^wharf_agent_run_cancel_[0-9a-f]{32}$/);
    assert.ok(a.length <= 63, "a PostgreSQL identifier");
    assert.equal(signalChannel("dep-a", "key-a"), a, "every process of the deployment agrees");
    assert.notEqual(signalChannel("dep-a", "key-b"), a);
    assert.notEqual(signalChannel("dep-b", "key-a"), a);
  });
});

describe("a deployment role's limits on a live PostgreSQL", () => {
  test("statement_timeout (and a role lifting its own is cancelled), temp_file_limit it cannot lift, role names that give no deployment away", async (t) => {
    const p = await startTestPlatform(t, {
      dialect: "postgres",
      env: { WHARF_DEPLOYMENT_DB_STATEMENT_TIMEOUT_SECONDS: "1" },
    });
    if (!p) return;
    const create = async (name: string) => {
      const res = await p.api("/v2/deployments", {
        method: "POST",
        json: { name, source: "internal_source", source_config: {}, source_revision_config: {}, secrets: [] },
      });
      assert.equal(res.status, 201, await res.clone().text());
      return (await res.json()) as { id: string };
    };
    const mine = await create("mine");
    const other = await create("other");
    const legacy = await create("legacy");
    // A role and schema named as before (by the id), with data in it: the next start renames them.
    const old = legacyDatabaseNames(legacy.id)!;
    const admin = new pg.Client({ connectionString: POSTGRES_URL });
    await admin.connect();
    t.after(() => admin.end());
    await admin.query(
      `CREATE ROLE "${old.role}" LOGIN; CREATE SCHEMA "${old.schema}" AUTHORIZATION "${old.role}"; CREATE TABLE "${old.schema}".kept (x int); INSERT INTO "${old.schema}".kept VALUES (7)`,
    );
    const wsId = (
      await p.ctx.db
        .selectFrom("deployments")
        .select("workspace_id")
        .where("id", "=", mine.id)
        .executeTakeFirstOrThrow()
    ).workspace_id;
    const d = await ensureDeploymentDatabase(p.ctx, { id: mine.id, workspace_id: wsId });
    await ensureDeploymentDatabase(p.ctx, { id: other.id, workspace_id: wsId });
    const renamed = await ensureDeploymentDatabase(p.ctx, { id: legacy.id, workspace_id: wsId });
    assert.equal(
      (await admin.query(`SELECT x FROM "${renamed.schema}".kept`)).rows[0].x,
      7,
      "the data moved with the rename",
    );
    assert.equal(
      (await admin.query("SELECT count(*)::int AS n FROM pg_roles WHERE rolname = $1", [old.role])).rows[0].n,
      0,
    );

    const c = new pg.Client({ connectionString: roleUrl(d, { host: "127.0.0.1", port: 5432 }) });
    await c.connect();
    const code = (q: string) =>
      c.query(q).then(
        () => "ok",
        (err: { code?: string }) => err.code ?? "error",
      );
    assert.equal((await c.query("SHOW statement_timeout")).rows[0].statement_timeout, "1s");
    assert.equal((await c.query("SHOW temp_file_limit")).rows[0].temp_file_limit, "1GB");
    assert.equal(await code("SELECT pg_sleep(3)"), "57014", "the role's statement_timeout cancels a long statement");
    // Lifting its own timeout: the platform's sweep cancels the statement anyway.
    await c.query("SET statement_timeout = 0");
    const t0 = Date.now();
    assert.equal(await code("SELECT pg_sleep(20)"), "57014");
    assert.ok(Date.now() - t0 < 10_000, `cancelled after ${Date.now() - t0} ms`);
    assert.equal(await code("SET temp_file_limit = -1"), "42501", "only a superuser may lift temp_file_limit");
    // A sort that spills past temp_file_limit is cut off (53400 configuration_limit_exceeded).
    await c.query("SET statement_timeout = 0; SET work_mem = '64kB'");
    await admin.query("ALTER ROLE " + JSON.stringify(d.role) + " SET temp_file_limit = 1024");
    const small = new pg.Client({ connectionString: roleUrl(d, { host: "127.0.0.1", port: 5432 }) });
    await small.connect();
    t.after(() => small.end().catch(() => {}));
    const smallCode = (q: string) =>
      small.query(q).then(
        () => "ok",
        (err: { code?: string }) => err.code ?? "error",
      );
    assert.equal((await small.query("SHOW temp_file_limit")).rows[0].temp_file_limit, "1MB");
    await small.query("SET statement_timeout = 0; SET work_mem = '64kB'");
    assert.equal(
      await smallCode("SELECT count(*) FROM (SELECT md5(g::text) AS h FROM generate_series(1, 400000) g ORDER BY 1) s"),
      "53400",
      "a huge sort stops at the role's temp_file_limit",
    );
    // Idle inside a transaction past the limit: the role's default ends the session, and so does the
    // sweep when the role lifted its own (the sweep runs every half limit).
    assert.equal(
      (await small.query("SHOW idle_in_transaction_session_timeout")).rows[0].idle_in_transaction_session_timeout,
      "1s",
    );
    await small.query("SET idle_in_transaction_session_timeout = 0");
    const ended = new Promise<string>((resolve) =>
      small.on("error", (err: Error & { code?: string }) => resolve(err.code ?? "error")),
    );
    await small.query("BEGIN; SELECT 1");
    assert.equal(
      await Promise.race([ended, new Promise<string>((r) => setTimeout(() => r("still open"), 10_000))]),
      "57P01",
      "the sweep ended a session idle in its transaction",
    );
    // Every role name is listed to every role (pg_roles, pg_namespace): none names a deployment.
    const listed = [
      ...(await c.query("SELECT rolname AS n FROM pg_roles")).rows,
      ...(await c.query("SELECT nspname AS n FROM pg_namespace")).rows,
    ].map((r) => r.n as string);
    assert.ok(listed.includes(deploymentDatabaseNames(other.id).role), "the other role exists");
    for (const id of [mine.id, other.id, legacy.id])
      assert.ok(!listed.some((n) => n.includes(id.replace(/-/g, ""))), `a name gives ${id} away`);
    // What it cannot read: passwords, the other's schema.
    assert.equal(await code("SELECT rolpassword FROM pg_authid"), "42501");
    assert.equal(await code(`SELECT * FROM "${deploymentDatabaseNames(other.id).schema}".x`), "42501");
    await c.end();
    for (const dep of [mine, other, legacy])
      assert.equal((await p.api(`/v2/deployments/${dep.id}`, { method: "DELETE" })).status, 204);
  });
});
