import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import crypto from "node:crypto";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { describe, test } from "node:test";
import { hostsSetting, startUpstreams } from "../egress/support/upstreams.ts";
import { isRoot, requireCapability } from "../support/requirements.ts";
import { EGRESS_FIXTURES, startEgressPlatform, startLocalRegistry } from "./egress-support.ts";
import { lastMessage, logsOf, pollRevision, runWait } from "./support.ts";

const OPAQUE = "opq_" + crypto.randomBytes(16).toString("hex");
const ROTATED = "rot_" + crypto.randomBytes(16).toString("hex");

/**
 * A deployment's egress end to end, loopback only: a confined build installs a dependency that
 * only a local npm registry has (through the proxy, its registry allowed implicitly although the
 * deployment's allow_list names only the agent's API), the deployed graph's calls get the
 * credential its header rule injects (the graph never sees it), an allow/deny list blocks, a PATCH
 * changes the running revision's rules without a new revision, and loopback stays unreachable.
 */
describe("deployment egress", () => {
  test("build fetches from a registry through the proxy; graph calls get credentials injected; PATCH applies live; loopback stays closed", async (t) => {
    if (!requireCapability(t, process.platform === "linux" && isRoot(), "confined deployments need root on Linux"))
      return;
    const up = await startUpstreams(t);
    const registry = await startLocalRegistry(t, {
      packageDir: path.join(EGRESS_FIXTURES, "registry-package"),
      publicUrl: "http://registry.test/",
      address: "127.0.0.3",
    });
    // Operator settings: test names resolve to the loopback servers, and only their addresses are reachable.
    Object.assign(process.env, {
      WHARF_EGRESS_HOSTS: `${hostsSetting(up)},registry.test:80=${registry.address}:${registry.port}`,
      WHARF_EGRESS_ALLOW_INTERNAL: `${up.address}/32,${registry.address}/32`,
      WHARF_EGRESS_UPSTREAM_CA_FILE: up.caFile,
      WHARF_EGRESS_SYSTEM_DNS: "0",
    });
    const p = (await startEgressPlatform(t))!;
    const platformPort = new URL(p.url).port;

    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "wharf-proj-egress-"));
    t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
    fs.cpSync(path.join(EGRESS_FIXTURES, "project"), dir, { recursive: true });
    // A cloud_b rule too: its compatibility file must appear under the read-only /etc.
    const { privateKey } = crypto.generateKeyPairSync("rsa", { modulusLength: 2048 });
    const serviceAccount = JSON.stringify({
      type: "service_account",
      project_id: "p",
      private_key_id: "real-key",
      private_key: privateKey.export({ type: "pkcs8", format: "pem" }).toString(),
      client_email: "agent@p.iam.gserviceaccount.com",
    });
    const proxy_config = {
      rules: [
        {
          name: "api",
          match_hosts: ["api.test"],
          headers: [{ name: "Authorization", type: "opaque", value: `Bearer ${OPAQUE}` }],
        },
        {
          name: "gcp",
          type: "cloud_b",
          cloud_b: {
            service_account_json: { type: "opaque", value: serviceAccount },
            scopes: ["https://www.googleapis.com/auth/devstorage.read_only"],
          },
        },
      ],
      access_control: { allow_list: ["api.test"] },
    };
    const started = performance.now();
    let res = await p.api("/v2/deployments", {
      method: "POST",
      json: {
        name: "egress",
        source: "internal_source",
        source_config: {},
        source_revision_config: { langgraph_config_path: "langgraph.json", local_path: dir },
        secrets: [],
        proxy_config,
      },
    });
    assert.equal(res.status, 201, await res.clone().text());
    const d = await res.json();
    assert.deepEqual(d.proxy_config.rules[0].headers[0], { name: "Authorization", type: "opaque", is_set: true });
    assert.ok(!JSON.stringify(d).includes(OPAQUE), "the write-only value is never returned");
    const rev = await pollRevision(p, d.id, d.latest_revision_id, 120_000);
    const buildLog = await logsOf(p, d.id, rev.id, "build");
    assert.equal(
      rev.status,
      "DEPLOYED",
      `${rev.status_message}\n${buildLog}\n${await logsOf(p, d.id, rev.id, "deploy")}`,
    );
    console.log(
      `create → DEPLOYED with a dependency fetched from the local registry through the proxy: ${Math.round(performance.now() - started)} ms (${buildLog.match(/build finished in \d+ ms/)?.[0]})`,
    );
    assert.ok(
      registry.seen.includes("/wharf-egress-fixture"),
      `the build asked the registry: ${registry.seen.join(", ")}`,
    );
    assert.ok(
      registry.seen.some((u) => u.endsWith(".tgz")),
      "and downloaded the tarball",
    );
    assert.match(buildLog, /dependencies installed and cached/);
    // Baseline in the same run: the host's npm, unconfined and without the proxy, fresh cache.
    const host = fs.mkdtempSync(path.join(os.tmpdir(), "wharf-npm-baseline-"));
    t.after(() => fs.rmSync(host, { recursive: true, force: true }));
    fs.copyFileSync(path.join(dir, "package.json"), path.join(host, "package.json"));
    const npmStart = performance.now();
    // Asynchronously: the registry answers from this very process.
    await promisify(execFile)(
      "npm",
      [
        "install",
        "--prefer-offline",
        "--no-audit",
        "--no-fund",
        "--no-package-lock",
        "--replace-registry-host=always",
        `--registry=http://${registry.address}:${registry.port}/`,
        `--cache=${path.join(host, ".cache")}`,
      ],
      { cwd: host },
    );
    console.log(
      `baseline: the host's npm install of the same dependency straight from the registry: ${Math.round(performance.now() - npmStart)} ms`,
    );
    // Again with the data plane warm (the first connection above waited for its process to
    // start): another install command is another dependency key, so npm fetches again.
    const warmStart = performance.now();
    res = await p.api("/v2/deployments", {
      method: "POST",
      json: {
        name: "egress-warm",
        source: "internal_source",
        source_config: { install_command: "npm install --no-audit --no-fund --no-package-lock" },
        source_revision_config: { langgraph_config_path: "langgraph.json", local_path: dir },
        secrets: [],
        proxy_config,
      },
    });
    const dw = await res.json();
    const revw = await pollRevision(p, dw.id, dw.latest_revision_id, 120_000);
    const logw = await logsOf(p, dw.id, revw.id, "build");
    assert.equal(revw.status, "DEPLOYED", logw);
    console.log(
      `again, the data plane warm: create → DEPLOYED ${Math.round(performance.now() - warmStart)} ms (${logw.match(/build finished in \d+ ms/)?.[0]})`,
    );
    assert.equal((await p.api(`/v2/deployments/${dw.id}`, { method: "DELETE" })).status, 204);
    // The same project again: its dependencies come from the cache, nothing from the registry.
    const before = registry.seen.length;
    const cachedStart = performance.now();
    res = await p.api("/v2/deployments", {
      method: "POST",
      json: {
        name: "egress-cached",
        source: "internal_source",
        source_config: {},
        source_revision_config: { langgraph_config_path: "langgraph.json", local_path: dir },
        secrets: [],
        proxy_config,
      },
    });
    const d2 = await res.json();
    const rev2 = await pollRevision(p, d2.id, d2.latest_revision_id, 120_000);
    assert.equal(rev2.status, "DEPLOYED");
    const log2 = await logsOf(p, d2.id, rev2.id, "build");
    assert.match(log2, /are cached: reusing them/);
    assert.equal(registry.seen.length, before);
    console.log(
      `the same project with its dependencies cached: create → DEPLOYED ${Math.round(performance.now() - cachedStart)} ms (${log2.match(/build finished in \d+ ms/)?.[0]})`,
    );
    assert.equal((await p.api(`/v2/deployments/${d2.id}`, { method: "DELETE" })).status, 204);

    const url = d.source_config.custom_url as string;
    const run = async (probes: string[]) => {
      const r = await runWait(url, p.apiKey, JSON.stringify(probes), "probe");
      assert.equal(r.status, 200, JSON.stringify(r.body));
      return JSON.parse(lastMessage(r.body)) as {
        results: Record<string, number | string>;
        dependency: string;
        env: Record<string, string>;
      };
    };
    const probes = [
      "https://api.test/v1/injected",
      "https://other.test/",
      "http://registry.test/wharf-egress-fixture",
      `http://127.0.0.1:${platformPort}/ok`,
      `http://localhost:${platformPort}/ok`,
      "http://127.0.0.1/ok",
      `proxy:http://127.0.0.1:${platformPort}/ok`,
      `proxy:http://${up.address}:${up.httpPort}/`,
      "file:/etc/wharf/google-service-account.json",
    ];
    let out = await run(probes);
    assert.equal(out.dependency, "hello from the local registry");
    assert.equal(out.results["https://api.test/v1/injected"], 200, JSON.stringify(out.results));
    const injected = up.seen.filter((e) => e.url === "/v1/injected");
    assert.equal(injected.at(-1)?.headers.authorization, `Bearer ${OPAQUE}`, "the header rule injected the credential");
    assert.equal(out.results["https://other.test/"], 403, "not in the allow_list");
    assert.equal(
      out.results["http://registry.test/wharf-egress-fixture"],
      403,
      "the registry is allowed to build steps only",
    );
    // The agent server's refusals are in its deploy log, with what would allow them (it keeps serving).
    const refusedLine =
      /egress refused .*other\.test:443.*not in allow_list.*; allowed by "other\.test" in the deployment's proxy_config\.access_control\.allow_list/;
    let deployLog = "";
    for (let i = 0; i < 30 && !refusedLine.test(deployLog); i++) {
      if (i) await new Promise((r) => setTimeout(r, 100)); // the log is written in batches
      deployLog = await logsOf(p, d.id, rev.id, "deploy");
    }
    assert.match(deployLog, refusedLine);
    // Loopback and the platform's own port stay closed, transparently and through the explicit proxy.
    assert.match(String(out.results[`http://127.0.0.1:${platformPort}/ok`]), /^error: ECONNREFUSED/);
    assert.match(String(out.results[`http://localhost:${platformPort}/ok`]), /^error: /);
    assert.notEqual(out.results["http://127.0.0.1/ok"], 200);
    assert.equal(out.results[`proxy:http://127.0.0.1:${platformPort}/ok`], 403);
    assert.equal(
      out.results[`proxy:http://${up.address}:${up.httpPort}/`],
      403,
      "an IP not in the allow_list, even one the operator allows",
    );
    // The process's environment: the proxy's variables and CA, never the credential.
    assert.equal(out.env.NODE_EXTRA_CA_CERTS, "/usr/local/share/ca-certificates/wharf-egress-ca.crt");
    assert.equal(out.env.HTTPS_PROXY, "http://127.0.0.1:3128");
    assert.ok(!JSON.stringify(out).includes(OPAQUE), "the graph never sees the credential");
    assert.equal(
      out.results["file:/etc/wharf/google-service-account.json"],
      "wharf-placeholder",
      "the cloud_b compatibility file, with a throwaway key",
    );
    assert.equal(out.env.GOOGLE_APPLICATION_CREDENTIALS, "/etc/wharf/google-service-account.json");

    // PATCH: new header value and a deny_list instead of the allow_list, on the running revision.
    res = await p.api(`/v2/deployments/${d.id}`, {
      method: "PATCH",
      json: {
        proxy_config: {
          rules: [
            {
              name: "api2",
              match_hosts: ["api.test"],
              headers: [{ name: "Authorization", type: "opaque", value: `Bearer ${ROTATED}` }],
            },
          ],
          access_control: { deny_list: ["other.test"] },
        },
      },
    });
    assert.equal(res.status, 200, await res.clone().text());
    const patched = await res.json();
    assert.equal(patched.latest_revision_id, d.latest_revision_id, "no new revision");
    assert.deepEqual(patched.proxy_config.access_control, { deny_list: ["other.test"] });
    out = await run(["https://api.test/v1/after-patch", "https://other.test/", "https://ws.test/"]);
    assert.equal(up.seen.filter((e) => e.url === "/v1/after-patch").at(-1)?.headers.authorization, `Bearer ${ROTATED}`);
    assert.equal(out.results["https://other.test/"], 403, "denied by the deny_list");
    assert.equal(out.results["https://ws.test/"], 200, "a deny_list lets other hosts through");
    const revs = await (await p.api(`/v2/deployments/${d.id}/revisions`)).json();
    assert.equal(revs.resources.length, 1);

    // A PATCH served by another platform process (here: the row changed underneath) reaches the
    // running revision within a few seconds.
    await p.ctx.db
      .updateTable("deployments")
      .set({
        proxy_config: JSON.stringify({
          version: 1,
          rules: [],
          callbacks: [],
          access_control: { deny_list: ["ws.test"] },
          no_proxy: [],
        }),
      })
      .where("id", "=", d.id)
      .execute();
    const changedAt = Date.now();
    while ((await run(["https://ws.test/"])).results["https://ws.test/"] !== 403) {
      assert.ok(Date.now() - changedAt < 8000, "another process's change did not arrive");
      await new Promise((r) => setTimeout(r, 200));
    }
    console.log(`another process's proxy_config change applied within ${Date.now() - changedAt} ms`);
    await p.api(`/v2/deployments/${d.id}`, {
      method: "PATCH",
      json: {
        proxy_config: {
          rules: [
            {
              name: "api2",
              match_hosts: ["api.test"],
              headers: [{ name: "Authorization", type: "opaque", value: `Bearer ${ROTATED}` }],
            },
          ],
          access_control: { deny_list: ["other.test"] },
        },
      },
    });

    // The replaced opaque value was released; deleting the deployment releases the current one.
    const sealed = async () =>
      Number(
        (
          await p.ctx.db
            .selectFrom("egress_sealed_values")
            .select((eb) => eb.fn.countAll().as("n"))
            .where("workspace_id", "=", d.tenant_id)
            .executeTakeFirst()
        )?.n ?? 0,
      );
    assert.equal(await sealed(), 1);
    // The deployment's egress log names each row's revision and process, never a value.
    type Entry = { revision_id: string; process: string; kind: string; host: string; rule: string | null };
    const egressLog = async (query = "") => {
      const r = await p.api(`/v2/deployments/${d.id}/egress-log?limit=1000${query}`);
      assert.equal(r.status, 200, await r.clone().text());
      return (await r.json()) as { entries: Entry[]; next_before: string | null };
    };
    let log = await egressLog();
    for (let i = 0; i < 50 && !log.entries.some((e) => e.kind === "block" && e.host === "other.test"); i++) {
      await new Promise((r) => setTimeout(r, 100));
      log = await egressLog();
    }
    assert.ok(
      log.entries.some(
        (e) =>
          e.revision_id === rev.id &&
          e.process === "server" &&
          e.kind === "inject" &&
          e.rule === "api" &&
          e.host === "api.test",
      ),
      JSON.stringify(log),
    );
    assert.ok(log.entries.some((e) => e.process === "server" && e.kind === "block" && e.host === "other.test"));
    assert.ok(!JSON.stringify(log).includes(OPAQUE) && !JSON.stringify(log).includes(ROTATED));
    assert.ok((await egressLog("&kind=block")).entries.every((e) => e.kind === "block"));
    assert.equal((await p.api("/v2/deployments/00000000-0000-0000-0000-000000000000/egress-log")).status, 404);
    assert.equal((await p.api(`/v2/deployments/${d.id}`, { method: "DELETE" })).status, 204);
    assert.equal(await sealed(), 0);
    assert.ok(!p.logs().includes(OPAQUE) && !p.logs().includes(ROTATED), "no credential in the platform's logs");
  });
});
