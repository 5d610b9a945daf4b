/**
 * Deployments rollout benchmark: create → DEPLOYED and patch → new revision serving for the echo
 * example (warm dependency and transform caches), and failed requests during a switch under load.
 * Baseline, measured in the same run: starting one agent server process for the same project by
 * hand until GET /ok answers (the floor any rollout pays). Then stateless run latency through the
 * deployment's URL against `wharf dev` and against the confined server's own socket, and what
 * each proxy shortcut buys (see measureRunLatency).
 * Run: ROUNDS=3 LATENCY_ROUNDS=5 node bin/run-ts.js bench/deployments-rollout.ts
 */
import { fork, spawn } from "node:child_process";
import fs from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { loadConfig } from "../src/config/config.ts";
import { createDeploymentsFeature } from "../src/deployments/feature.ts";
import { WHARF_BIN, WHARF_ROOT } from "../src/deployments/layout.ts";
import { createLogger } from "../src/log/logger.ts";
import { allFeatures } from "../src/platform/features.ts";
import { startPlatform } from "../src/platform/start-platform.ts";
import { proxyTuning } from "../src/deployments/api/proxy.ts";
import { socketRoot, SOCKET_NAME } from "../src/deployments/confinement/confinement.ts";
import { encodePrincipal, PRINCIPAL_HEADER } from "../src/deployments/runtime/principal-header.ts";

const PROJECT = path.join(WHARF_ROOT, "examples/echo-agent");
const ROUNDS = Number(process.env.ROUNDS ?? 3);
const LATENCY_ROUNDS = Number(process.env.LATENCY_ROUNDS ?? 5);
const socketPathOf = (revisionId: string) => path.join(socketRoot(), revisionId, SOCKET_NAME);
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const pct = (xs: number[], p: number) =>
  [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor((xs.length * p) / 100))];

async function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const s = net.createServer().listen(0, "127.0.0.1", () => {
      const port = (s.address() as net.AddressInfo).port;
      s.close(() => resolve(port));
    });
  });
}

async function untilOk(url: string): Promise<void> {
  for (;;) {
    try {
      if ((await fetch(url)).status === 200) return;
    } catch {
      /* not yet */
    }
    await new Promise((r) => setTimeout(r, 20));
  }
}

const home = fs.mkdtempSync(path.join(os.tmpdir(), "wharf-bench-deploy-"));
// The bench is the operator: it lets its platform build from the example projects.
const config = loadConfig({ WHARF_HOME: home, WHARF_PORT: "0", WHARF_DEPLOY_LOCAL_ROOTS: path.dirname(PROJECT) });

// Baseline: one agent server started by hand (as `wharf dev` does: open on loopback, unconfined).
const baseline: number[] = [];
for (let i = 0; i < ROUNDS; i++) {
  const port = await freePort();
  const started = performance.now();
  const child = spawn(
    process.execPath,
    [WHARF_BIN, "agent-server", "--project", PROJECT, "--port", String(port), "--server-id", `bench-${i}`, "--open"],
    { env: { ...process.env, WHARF_HOME: home, WHARF_LOG_LEVEL: "warn" }, stdio: "ignore" },
  );
  await untilOk(`http://127.0.0.1:${port}/ok`);
  baseline.push(performance.now() - started);
  child.kill("SIGTERM");
  await new Promise((r) => child.once("exit", r));
}

// Egress too: every build step and agent server gets its proxy attachment, as under `wharf up`.
const features = allFeatures().filter((f) => f.name === "identity" || f.name === "secrets" || f.name === "egress");
features.push(createDeploymentsFeature({ pollIntervalMs: 200, drainTimeoutMs: 5000 }));
const platform = await startPlatform(config, { features, log: createLogger({ level: "warn" }) });
const apiKey = platform.bootstrap.apiKey!;
const api = async (p: string, method = "GET", json?: unknown) => {
  const res = await fetch(platform.url + p, {
    method,
    headers: { "x-api-key": apiKey, "content-type": "application/json" },
    body: json === undefined ? undefined : JSON.stringify(json),
  });
  return res.json();
};
async function waitDeployed(id: string, rev: string): Promise<void> {
  for (;;) {
    const r = await api(`/v2/deployments/${id}/revisions/${rev}`);
    if (r.status === "DEPLOYED") return;
    if (/FAILED|SKIPPED|INTERRUPTED/.test(r.status))
      throw new Error(`revision ${rev} ended ${r.status}: ${r.status_message}`);
    await new Promise((res) => setTimeout(res, 25));
  }
}
const runWait = (url: string) =>
  fetch(`${url}/runs/wait`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-api-key": apiKey },
    body: JSON.stringify({ assistant_id: "echo", input: { messages: [{ role: "human", content: "hi" }] } }),
  });

/**
 * Stateless run latency, sequential, from a client in its own process: `wharf dev` on the same
 * project (an agent server by hand, open on loopback), the revision's confined agent server on its
 * unix socket directly (what the confinement costs), and the deployment's URL (what the proxy hop
 * adds). Blocks of each alternate so that the host's load drifts evenly over them. Then the same
 * for the proxy with its shortcuts turned off one by one: what each buys, in latency and in the
 * platform process's CPU time per run (less noisy than latency on a shared host).
 */
async function measureRunLatency(revisionId: string) {
  const port = await freePort();
  // Its own home, as on a developer's machine: sharing the platform's SQLite file would slow it down.
  const devHome = fs.mkdtempSync(path.join(os.tmpdir(), "wharf-bench-dev-"));
  const dev = spawn(
    process.execPath,
    [WHARF_BIN, "agent-server", "--project", PROJECT, "--port", String(port), "--server-id", "bench-latency", "--open"],
    { env: { ...process.env, WHARF_HOME: devHome, WHARF_LOG_LEVEL: "warn" }, stdio: "ignore" },
  );
  await untilOk(`http://127.0.0.1:${port}/ok`);
  // How the previous version of this benchmark measured: wharf dev on the platform's own home
  // (one SQLite file for both) and the client's fetch in the platform's own event loop.
  const sharedPort = await freePort();
  const devShared = spawn(
    process.execPath,
    [
      WHARF_BIN,
      "agent-server",
      "--project",
      PROJECT,
      "--port",
      String(sharedPort),
      "--server-id",
      "bench-latency-shared",
      "--open",
    ],
    { env: { ...process.env, WHARF_HOME: home, WHARF_LOG_LEVEL: "warn" }, stdio: "ignore" },
  );
  await untilOk(`http://127.0.0.1:${sharedPort}/ok`);
  const inProcess = async (n: number) => {
    const out: number[] = [];
    for (let i = 0; i < n; i++) {
      const t0 = performance.now();
      const res = await fetch(`${platform.url}/deployments/${deployment.id}/runs/wait`, {
        method: "POST",
        headers: { "content-type": "application/json", "x-api-key": apiKey },
        body,
      });
      await res.arrayBuffer();
      out.push(performance.now() - t0);
    }
    return out;
  };
  const client = fork(path.join(WHARF_ROOT, "bench/deployments-latency-client.mjs"), [], {
    stdio: ["ignore", "inherit", "inherit", "ipc"],
  });
  const body = JSON.stringify({ assistant_id: "echo", input: { messages: [{ role: "human", content: "hi" }] } });
  const principal = encodePrincipal({
    userId: platform.bootstrap.userId!,
    workspaceId: platform.bootstrap.workspaceId!,
    scheme: "api_key",
    apiKeyId: null,
  });
  const platformPort = Number(new URL(platform.url).port);
  const targets = {
    dev: { target: { host: "127.0.0.1", port }, path: "/runs/wait", headers: {} },
    devShared: { target: { host: "127.0.0.1", port: sharedPort }, path: "/runs/wait", headers: {} },
    direct: {
      target: { socketPath: socketPathOf(revisionId) },
      path: "/runs/wait",
      headers: { [PRINCIPAL_HEADER]: principal },
    },
    proxied: {
      target: { host: "127.0.0.1", port: platformPort },
      path: `/deployments/${deployment.id}/runs/wait`,
      headers: { "x-api-key": apiKey },
    },
  };
  type Name = keyof typeof targets;
  const call = (name: Name, n: number) =>
    new Promise<number[]>((resolve, reject) => {
      client.once("message", (m: { times?: number[]; error?: string }) =>
        m.times ? resolve(m.times) : reject(new Error(m.error)),
      );
      client.send({ ...targets[name], body, n });
    });
  const variants: Array<[string, Partial<typeof proxyTuning>]> = [
    ["neither (a web Response, the Fetch Request's signal)", { pipeResponses: false, nodeSignals: false }],
    ["+ responses piped to the client's socket", { pipeResponses: true, nodeSignals: false }],
    ["+ client disconnects watched on the socket (current)", { pipeResponses: true, nodeSignals: true }],
  ];
  const defaults = { ...proxyTuning };
  const times: Record<string, number[]> = {};
  const cpu: Record<string, number[]> = {};
  const block = async (key: string, name: Name, n: number) => {
    const before = process.cpuUsage();
    const t = await call(name, n);
    const used = process.cpuUsage(before);
    (times[key] ??= []).push(...t);
    (cpu[key] ??= []).push((used.user + used.system) / 1000 / n);
  };
  for (const name of Object.keys(targets) as Name[]) await call(name, 30); // warm-up
  for (let round = 0; round < LATENCY_ROUNDS; round++) {
    for (const name of Object.keys(targets) as Name[]) await block(name, name, 40);
    (times.inProcess ??= []).push(...(await inProcess(40)));
    for (const [label, tuning] of variants) {
      Object.assign(proxyTuning, tuning);
      await block(label, "proxied", 40);
      Object.assign(proxyTuning, defaults);
    }
  }
  client.kill();
  devShared.kill("SIGTERM");
  dev.kill("SIGTERM");
  await new Promise((r) => dev.once("exit", r));
  fs.rmSync(devHome, { recursive: true, force: true });
  const devP50 = median(times.dev);
  return {
    print() {
      console.log(
        `\nstateless run p50, sequential, client in its own process (${LATENCY_ROUNDS} rounds of 40 per target, interleaved):`,
      );
      const line = (label: string, key: string, note = "") =>
        console.log(
          `  ${label.padEnd(54)} ${median(times[key]).toFixed(2).padStart(6)} ms   ${(median(times[key]) / devP50).toFixed(2)}x${note}`,
        );
      line("wharf dev (agent server by hand, open)", "dev", "   baseline");
      line("confined agent server, its unix socket directly", "direct", "   (the confinement's share)");
      line("deployment URL (platform proxy → confined server)", "proxied", "   (goal ≤ 1.5x)");
      console.log("  measured as before (what fixing the measurement changed):");
      line("  wharf dev on the platform's home (one SQLite file)", "devShared");
      line("  deployment URL, client in the platform's event loop", "inProcess");
      console.log(
        `  platform CPU per proxied run ${median(cpu.proxied).toFixed(2)} ms (per dev run, the platform idling: ${median(cpu.dev).toFixed(2)} ms)`,
      );
      console.log("what each proxy change buys (same run, deployment URL):");
      for (const [label] of variants)
        console.log(
          `  ${label.padEnd(54)} ${median(times[label]).toFixed(2).padStart(6)} ms   ${(median(times[label]) / devP50).toFixed(2)}x   platform CPU ${median(cpu[label]).toFixed(2)} ms/run`,
        );
    },
  };
}

// Warm-up: fills tsx's transform cache as a first deployment on a machine would.
const warm = await api("/v2/deployments", "POST", {
  name: "warmup",
  source: "internal_source",
  source_config: {},
  source_revision_config: { langgraph_config_path: "langgraph.json", local_path: PROJECT },
  secrets: [],
});
await waitDeployed(warm.id, warm.latest_revision_id);

const create: number[] = [];
/** Where a create's time goes: milliseconds spent in each status, from the revision's transitions. */
const phases: Array<Record<string, number>> = [];
async function phasesOf(id: string, rev: string): Promise<Record<string, number>> {
  const body = (await api(`/v2/deployments/${id}/revisions/${rev}/transitions`)) as
    { transitions?: Array<{ to_status: string; at: string }> } | Array<{ to_status: string; at: string }>;
  const list = Array.isArray(body) ? body : (body.transitions ?? []);
  const out: Record<string, number> = {};
  for (let i = 0; i + 1 < list.length; i++)
    out[list[i].to_status] = Date.parse(list[i + 1].at) - Date.parse(list[i].at);
  return out;
}
const patchSecrets: number[] = [];
const patchSource: number[] = [];
let deployment = warm;
for (let i = 0; i < ROUNDS; i++) {
  let t0 = performance.now();
  const d = await api("/v2/deployments", "POST", {
    name: `bench-${i}`,
    source: "internal_source",
    source_config: {},
    source_revision_config: { langgraph_config_path: "langgraph.json", local_path: PROJECT },
    secrets: [{ name: "ROUND", value: String(i) }],
  });
  await waitDeployed(d.id, d.latest_revision_id);
  create.push(performance.now() - t0);
  phases.push(await phasesOf(d.id, d.latest_revision_id));
  t0 = performance.now();
  let p = await api(`/v2/deployments/${d.id}`, "PATCH", { secrets: [{ name: "ROUND", value: `${i}b` }] });
  await waitDeployed(d.id, p.latest_revision_id);
  patchSecrets.push(performance.now() - t0);
  t0 = performance.now();
  p = await api(`/v2/deployments/${d.id}`, "PATCH", { source_revision_config: { local_path: PROJECT } });
  await waitDeployed(d.id, p.latest_revision_id);
  patchSource.push(performance.now() - t0);
  deployment = d;
}

// Failed requests during a switch: 8 clients on the stable URL while a PATCH rolls out.
const url = `${platform.url}/deployments/${deployment.id}`;
let failed = 0;
let ok = 0;
const latencies: number[] = [];
let stop = false;
const client = async () => {
  while (!stop) {
    const t0 = performance.now();
    try {
      const res = await runWait(url);
      await res.arrayBuffer();
      if (res.status === 200) ok++;
      else failed++;
    } catch {
      failed++;
    }
    latencies.push(performance.now() - t0);
  }
};
const clients = Array.from({ length: 8 }, client);
await new Promise((r) => setTimeout(r, 500));
const p = await api(`/v2/deployments/${deployment.id}`, "PATCH", { secrets: [{ name: "ROUND", value: "switch" }] });
await waitDeployed(deployment.id, p.latest_revision_id);
await new Promise((r) => setTimeout(r, 1500));
stop = true;
await Promise.all(clients);

const latency = await measureRunLatency(p.latest_revision_id);
await platform.stop();
fs.rmSync(home, { recursive: true, force: true });

const b = median(baseline);
const row = (name: string, xs: number[]) =>
  console.log(`${name.padEnd(44)} ${median(xs).toFixed(0).padStart(6)} ms   ${(median(xs) / b).toFixed(2)}x baseline`);
console.log(`\nDeployments rollout (${ROUNDS} rounds, medians; baseline = one agent server started by hand until /ok)`);
console.log(`${"baseline: agent server start → /ok".padEnd(44)} ${b.toFixed(0).padStart(6)} ms   1.00x`);
row("create → DEPLOYED (build + deploy)", create);
for (const status of Object.keys(phases[0] ?? {}))
  console.log(
    `  of which ${status.padEnd(35)} ${median(phases.map((ph) => ph[status] ?? 0))
      .toFixed(0)
      .padStart(6)} ms`,
  );
row("patch secrets → new revision serving", patchSecrets);
row("patch source → new revision serving", patchSource);
console.log(
  `requests during a switch under 8 clients: ${ok} ok, ${failed} failed (${((failed / Math.max(1, ok + failed)) * 100).toFixed(2)}%); latency p50 ${pct(latencies, 50).toFixed(1)} ms, p99 ${pct(latencies, 99).toFixed(1)} ms`,
);
latency.print();
process.exit(0);
