import assert from "node:assert/strict";
import crypto from "node:crypto";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { describe, test } from "node:test";
import { Launcher } from "../../src/confinement/launcher.ts";
import { DIALECTS } from "../support/dialects.ts";
import { isRoot, requireCapability } from "../support/requirements.ts";
import type { TestPlatform } from "../support/platform.ts";
import { startEgressPlatform } from "./egress-support.ts";
import {
  copyProject,
  lastMessage,
  logsOf,
  pollRevision,
  runWait,
  startDeploymentsPlatform,
  type RevisionBody,
} from "./support.ts";

/**
 * What deployed code can do to the platform's machine through the edges of its confinement: the
 * bind sources the platform mounts, the project files it reads on the host, the command lines of
 * its processes, and what its own /proc shows. Every test performs the attack.
 */

async function create(
  p: TestPlatform,
  name: string,
  dir: string,
  extra: { source_config?: Record<string, unknown>; secrets?: Array<{ name: string; value: string }> } = {},
) {
  const res = await p.api("/v2/deployments", {
    method: "POST",
    json: {
      name,
      source: "internal_source",
      source_config: extra.source_config ?? {},
      source_revision_config: { langgraph_config_path: "langgraph.json", local_path: dir },
      secrets: extra.secrets ?? [],
    },
  });
  assert.equal(res.status, 201, await res.clone().text());
  const d = await res.json();
  return { id: d.id as string, url: d.source_config.custom_url as string, revisionId: d.latest_revision_id as string };
}

async function explain(p: TestPlatform, id: string, rev: RevisionBody): Promise<string> {
  return `${rev.status}: ${rev.status_message}\n${await logsOf(p, id, rev.id, "build")}\n${await logsOf(p, id, rev.id, "deploy")}`;
}

/** Host processes' command lines, NUL-separated arguments joined by spaces. */
function allCommandLines(): Map<number, string> {
  const out = new Map<number, string>();
  for (const name of fs.readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    try {
      out.set(Number(name), fs.readFileSync(`/proc/${name}/cmdline`, "utf8").split("\0").join(" "));
    } catch {
      /* exited meanwhile */
    }
  }
  return out;
}

/** The environment of the host process whose environment has `NAME=value`. */
function environOf(name: string, value: string): Record<string, string> | null {
  for (const pid of fs.readdirSync("/proc")) {
    if (!/^\d+$/.test(pid)) continue;
    let vars: string[];
    try {
      vars = fs.readFileSync(`/proc/${pid}/environ`, "utf8").split("\0");
    } catch {
      continue;
    }
    if (vars.includes(`${name}=${value}`))
      return Object.fromEntries(
        vars.filter(Boolean).map((v) => [v.slice(0, v.indexOf("=")), v.slice(v.indexOf("=") + 1)]),
      );
  }
  return null;
}

describe("deployed code at the confinement's edges", () => {
  test("a link to / planted in the shared dependencies, then made the project's dependency link, fails the build: the host's root is never mounted", async (t) => {
    if (!requireCapability(t, isRoot(), "confining deployments needs root (namespaces, cgroups)")) return;
    const p = await startDeploymentsPlatform(t);
    if (!p) return;
    const dir = copyProject(t, "escape");
    const d = await create(p, "escape", dir, {
      source_config: {
        // The install step's node_modules becomes the shared dependency set, link included.
        install_command: "mkdir -p node_modules && ln -s / node_modules/escape",
        // The build step repoints the project's link into the planted one (still under deps/).
        build_command: 't=$(readlink node_modules) && rm node_modules && ln -s "$t/escape/x" node_modules',
      },
    });
    const rev = await pollRevision(p, d.id, d.revisionId);
    if (rev.status === "DEPLOYED") {
      const run = await runWait(d.url, p.apiKey, "go", "probe");
      assert.fail(
        `the deployment was served with the planted link; it sees: ${JSON.stringify(JSON.parse(lastMessage(run.body)).escapes).slice(0, 600)}`,
      );
    }
    assert.equal(rev.status, "BUILD_FAILED", await explain(p, d.id, rev));
    assert.match(rev.status_message ?? "", /node_modules.*link/i, await explain(p, d.id, rev));
    // An install that leaves node_modules itself as a link to a host folder: root never walks it.
    const d2 = await create(p, "escape-2", copyProject(t, "escape"), {
      source_config: { install_command: "ln -s /etc node_modules" },
    });
    const rev2 = await pollRevision(p, d2.id, d2.revisionId);
    assert.equal(rev2.status, "BUILD_FAILED", await explain(p, d2.id, rev2));
    assert.match(rev2.status_message ?? "", /node_modules as a symbolic link/, await explain(p, d2.id, rev2));
    // The platform is still serving.
    assert.equal((await fetch(`${p.url}/ok`)).status, 200);
  });

  test("the holder itself refuses a bind source below its folder that passes through a link: what it checked is what it mounts", async (t) => {
    if (!requireCapability(t, isRoot(), "confining deployments needs root (namespaces, cgroups)")) return;
    const root = fs.mkdtempSync(path.join(os.tmpdir(), "wharf-bind-root-"));
    t.after(() => fs.rmSync(root, { recursive: true, force: true }));
    fs.mkdirSync(path.join(root, "real"));
    fs.symlinkSync("/", path.join(root, "real", "escape"));
    const baseCacheDir = process.env.WHARF_SANDBOX_BASE_CACHE || path.join(os.tmpdir(), "wharf-test-base-images");
    const launcher = new Launcher({ isolation: true, scratchRoot: path.join(root, "scratch"), baseCacheDir });
    const spec = (src: string, argv: string[]) => ({
      id: `dep-bind-test-${crypto.randomBytes(4).toString("hex")}`,
      uid: 399_999,
      limits: { memBytes: 256 * 1024 * 1024, cpuMillicores: 500, pidsMax: 64 },
      plan: { binds: [{ src, dest: "/x", beneath: root }], symlinks: [] },
      argv,
      env: {},
      cwd: "/",
    });
    await assert.rejects(
      launcher.launch(spec(path.join(root, "real", "escape", "etc"), ["/usr/bin/true"])),
      /\/x is or passes through a symbolic link \(refused\)/,
    );
    await assert.rejects(
      launcher.launch(spec(path.join(root, "real", "escape"), ["/usr/bin/true"])),
      /\/x is or passes through a symbolic link \(refused\)/,
    );
    // The same folder without the link on the way is bound (the link inside it stays a link).
    const ok = await launcher.launch(spec(path.join(root, "real"), ["/usr/bin/test", "-L", "/x/escape"]));
    assert.equal(await ok.exited, 0);
    await ok.stop(0);
  });

  test("a FIFO, a link to /dev/zero or a link to a host file left as .npmrc fails the build, and the platform keeps answering meanwhile", async (t) => {
    if (!requireCapability(t, isRoot(), "confining deployments needs root (namespaces, cgroups)")) return;
    const p = await startDeploymentsPlatform(t);
    if (!p) return;
    for (const [what, command] of [
      ["a FIFO", "mkfifo .npmrc"],
      ["a link to /dev/zero", "ln -s /dev/zero .npmrc"],
      ["a link to a host file", "ln -s /etc/hostname .npmrc"],
    ]) {
      const d = await create(p, `npmrc-${crypto.randomBytes(3).toString("hex")}`, copyProject(t, "escape"), {
        source_config: { install_command: command },
      });
      let rev: RevisionBody | null = null;
      const polling = pollRevision(p, d.id, d.revisionId).then((r) => (rev = r));
      let slowest = 0;
      while (!rev) {
        const started = performance.now();
        const ok: Response = await fetch(`${p.url}/ok`, { signal: AbortSignal.timeout(5000) });
        assert.equal(ok.status, 200);
        slowest = Math.max(slowest, performance.now() - started);
        await new Promise((r) => setTimeout(r, 50));
      }
      await polling;
      const done = rev as RevisionBody;
      assert.ok(slowest < 1000, `${what}: /ok took ${Math.round(slowest)} ms while the build ran`);
      assert.equal(done.status, "BUILD_FAILED", `${what}: ${await explain(p, d.id, done)}`);
      assert.match(done.status_message ?? "", /\.npmrc/, `${what}: ${await explain(p, d.id, done)}`);
    }
  });

  for (const dialect of DIALECTS)
    test(`no secret of a running deployment is on any process's command line (${dialect})`, async (t) => {
      if (!requireCapability(t, isRoot(), "confining deployments needs root (namespaces, cgroups)")) return;
      const p = await startDeploymentsPlatform(t, { dialect });
      if (!p) return;
      const secret = `s3cret-${crypto.randomBytes(12).toString("hex")}`;
      const d = await create(p, "secretive", copyProject(t, "echo"), {
        secrets: [{ name: "MY_SECRET", value: secret }],
      });
      const rev = await pollRevision(p, d.id, d.revisionId);
      assert.equal(rev.status, "DEPLOYED", await explain(p, d.id, rev));
      // The server's own environment holds its keys (read as root, as only root and its own uid can).
      const env = environOf("WHARF_DEPLOYMENT_ID", d.id);
      assert.ok(env, "the deployment's server process was not found");
      assert.equal(env.MY_SECRET, secret);
      const values: Record<string, string> = {
        secret,
        agentKey: env.WHARF_MASTER_KEY,
        gatewayKey: env.LANGSMITH_API_KEY,
      };
      if (dialect === "postgres") {
        assert.ok(env.WHARF_AGENT_DATABASE_URL, "no database URL in the server's environment");
        values.dbPassword = decodeURIComponent(new URL(env.WHARF_AGENT_DATABASE_URL).password);
      }
      for (const [name, value] of Object.entries(values))
        assert.ok(value && value.length >= 8, `${name} is missing from the environment`);
      for (const [pid, cmdline] of allCommandLines()) {
        for (const [name, value] of Object.entries(values))
          assert.ok(
            !cmdline.includes(value),
            `the ${name} is on the command line of pid ${pid}: ${cmdline.slice(0, 200)}`,
          );
      }
    });

  test("no phase of a deployment (install, build, served with egress rules) shows a host path in its mount table", async (t) => {
    if (!requireCapability(t, isRoot(), "confining deployments needs root (namespaces, cgroups)")) return;
    const p = await startEgressPlatform(t);
    if (!p) return;
    const res = await p.api("/v2/deployments", {
      method: "POST",
      json: {
        name: "mount-report",
        source: "internal_source",
        source_config: {
          install_command: "cat /proc/self/mountinfo > mountinfo-install.txt",
          build_command: "cat /proc/self/mountinfo > mountinfo-build.txt",
        },
        source_revision_config: { langgraph_config_path: "langgraph.json", local_path: copyProject(t, "mount-report") },
        secrets: [],
        // Rules give the served revision an egress folder (its CA bundle, its resolver) to show.
        proxy_config: {
          rules: [
            { name: "api", match_hosts: ["api.test"], headers: [{ name: "X-Probe", type: "plaintext", value: "1" }] },
          ],
        },
      },
    });
    assert.equal(res.status, 201, await res.clone().text());
    const d = await res.json();
    const rev = await pollRevision(p, d.id, d.latest_revision_id);
    assert.equal(rev.status, "DEPLOYED", await explain(p, d.id, rev));
    const buildSeconds = /build finished in (\d+) ms/.exec(await logsOf(p, d.id, rev.id, "build"))?.[1];
    console.log(`install + build + load check of the reporting project: ${buildSeconds} ms`);
    const run = await runWait(d.source_config.custom_url, p.apiKey, "go", "report");
    assert.equal(run.status, 200, JSON.stringify(run.body));
    const report = JSON.parse(lastMessage(run.body)) as Record<"install" | "build" | "serve", string>;
    const checkout = path.resolve(fileURLToPath(new URL("../..", import.meta.url)));
    for (const [phase, mountinfo] of Object.entries(report)) {
      assert.match(mountinfo, / \/proc /, `the ${phase} step left no mount table: ${mountinfo.slice(0, 200)}`);
      for (const [what, hostPath] of [
        ["$WHARF_HOME", p.home],
        ["the checkout", checkout],
      ])
        assert.ok(
          !mountinfo.includes(hostPath),
          `the ${phase} step's mount table shows ${what} (${hostPath}):\n${mountinfo
            .split("\n")
            .filter((l) => l.includes(hostPath))
            .join("\n")
            .slice(0, 1500)}`,
        );
    }
  });

  test("deployed code's /proc shows only its own processes, and its mount table no host path ($WHARF_HOME, the checkout)", async (t) => {
    if (!requireCapability(t, isRoot(), "confining deployments needs root (namespaces, cgroups)")) return;
    const p = await startDeploymentsPlatform(t);
    if (!p) return;
    const d = await create(p, "looker", copyProject(t, "escape"));
    const rev = await pollRevision(p, d.id, d.revisionId);
    assert.equal(rev.status, "DEPLOYED", await explain(p, d.id, rev));
    const run = await runWait(d.url, p.apiKey, "go", "probe");
    assert.equal(run.status, 200, JSON.stringify(run.body));
    const report = JSON.parse(lastMessage(run.body)) as { procs: string[]; mountinfo: string };
    // bubblewrap's init and the server: nothing of the host, the platform or other deployments.
    assert.ok(
      report.procs.length <= 4,
      `it sees ${report.procs.length} processes: ${report.procs.join(" | ").slice(0, 600)}`,
    );
    for (const c of report.procs)
      assert.ok(!c.includes(process.argv[1] ?? "\0") && !/wharf up|--test/.test(c), `it sees a host process: ${c}`);
    // A bind mount's root field is the source's path in its filesystem: the platform's folders
    // (its home, where Wharf is installed) must not show there or in any mount's options.
    const checkout = path.resolve(fileURLToPath(new URL("../..", import.meta.url)));
    for (const [what, hostPath] of [
      ["$WHARF_HOME", p.home],
      ["the checkout", checkout],
    ])
      assert.ok(
        !report.mountinfo.includes(hostPath),
        `its mount table shows ${what} (${hostPath}):\n${report.mountinfo
          .split("\n")
          .filter((l) => l.includes(hostPath))
          .join("\n")
          .slice(0, 1500)}`,
      );
  });
});
