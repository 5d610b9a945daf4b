// Sandboxes on this host: create→ready (an exec succeeds) p50/p90/p99 over 50 creates through the
// API (one every 150 ms, so the warm pool keeps up, as with clients that do not all arrive at
// once), 10 creates at once, exec round trip through the HTTP data plane, and memory per idle
// sandbox with 100 running; each
// printed beside its floor measured in the same run (a bare `bwrap --unshare-all … /bin/true`, and
// 100 bare `bwrap … sleep` processes). Needs root.
//   node bin/run-ts.js bench/sandbox-lifecycle.ts [--quick]
import { spawn, spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { loadConfig } from "../src/config/config.ts";
import { createLogger } from "../src/log/logger.ts";
import { allFeatures } from "../src/platform/features.ts";
import { startPlatform } from "../src/platform/start-platform.ts";
import { createSandboxesFeature } from "../src/sandboxes/feature.ts";

const quick = process.argv.includes("--quick");
const CREATES = quick ? 10 : 50;
const EXECS = quick ? 50 : 200;
const IDLE = quick ? 20 : 100;
const BWRAP = [
  "--unshare-all",
  "--ro-bind",
  "/usr",
  "/usr",
  "--symlink",
  "usr/bin",
  "/bin",
  "--symlink",
  "usr/lib",
  "/lib",
  "--symlink",
  "usr/lib64",
  "/lib64",
  "--proc",
  "/proc",
  "--dev",
  "/dev",
];

const pct = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))];
};
const ms = (x: number) => `${x.toFixed(1)} ms`;
const mb = (x: number) => `${(x / 1024 / 1024).toFixed(2)} MB`;
/** The memory cgroup directory (v1 or v2) of a relative cgroup path. */
function memCgroup(rel: string): string {
  return fs.existsSync("/sys/fs/cgroup/memory/cgroup.procs") ? `/sys/fs/cgroup/memory/${rel}` : `/sys/fs/cgroup/${rel}`;
}
function memUsage(dir: string): number {
  for (const f of ["memory.usage_in_bytes", "memory.current"]) {
    try {
      return Number(fs.readFileSync(path.join(dir, f), "utf8"));
    } catch {}
  }
  return 0;
}
async function settle(): Promise<void> {
  spawnSync("sync");
  await new Promise((r) => setTimeout(r, 1500));
}

if (process.getuid?.() !== 0) {
  console.error("sandbox benchmark: run as root (the local driver needs it)");
  process.exit(2);
}

// Floor 1: a bare bwrap with its own namespaces running /bin/true.
const floor: number[] = [];
for (let i = 0; i < 50; i++) {
  const t0 = performance.now();
  const r = spawnSync("bwrap", [...BWRAP, "/bin/true"]);
  if (r.status !== 0) throw new Error(`bwrap failed: ${r.stderr}`);
  floor.push(performance.now() - t0);
}

const home = fs.mkdtempSync(path.join(os.tmpdir(), "wharf-bench-sbx-"));
const POOL = Number(process.env.WHARF_SANDBOX_WARM_POOL ?? 10);
const featureEnv = {
  WHARF_SANDBOX_DISK: process.env.WHARF_SANDBOX_DISK ?? "image",
  WHARF_SANDBOX_WARM_POOL: String(POOL),
  WHARF_SANDBOX_BASE_CACHE: path.join(os.tmpdir(), "wharf-test-sandbox-base"),
  // Sandboxes outlive the first platform process: the second one re-adopts them (restart measure).
  WHARF_SANDBOX_KEEP_RUNNING: "1",
  // 45 default-sized sandboxes at once (2 GiB, 10 GiB each, sparse and idle): past admission's
  // sound defaults on a small host, which this measure is not about.
  WHARF_SANDBOX_MEMORY_OVERCOMMIT: "100",
  WHARF_SANDBOX_DISK_OVERCOMMIT: "100",
  WHARF_SANDBOX_WORKSPACE_MAX_MEM_BYTES: String(1024 ** 4),
  WHARF_SANDBOX_WORKSPACE_MAX_DISK_BYTES: String(16 * 1024 ** 4),
};
const feature = createSandboxesFeature(featureEnv);
const waitForPool = async () => {
  for (let i = 0; i < 600 && (await feature.manager()!.warmReady()) < POOL; i++)
    await new Promise((r) => setTimeout(r, 100));
};
const boot = (f: ReturnType<typeof createSandboxesFeature>) =>
  startPlatform(loadConfig({ WHARF_HOME: home, WHARF_PORT: "0" }), {
    log: createLogger({ level: process.env.BENCH_LOG ?? "warn" }),
    features: allFeatures()
      .filter((x) => x.name !== "sandboxes")
      .concat(f),
  });
let platform = await boot(feature);
const key = platform.bootstrap.apiKey!;
const RESTART_BOXES = 45;
const headers = { "x-api-key": key, "content-type": "application/json" };
await feature.manager()!.prepare();
try {
  // Create → ready, through the API (wait_for_ready: the answer comes once an exec succeeded).
  const create: number[] = [];
  const names: string[] = [];
  await waitForPool();
  for (let i = 0; i < CREATES; i++) {
    await new Promise((r) => setTimeout(r, 150));
    const t0 = performance.now();
    const res = await fetch(`${platform.url}/v2/sandboxes/boxes`, {
      method: "POST",
      headers,
      body: JSON.stringify({ name: `bench-${i}` }),
    });
    const body = await res.json();
    if (res.status !== 201 || body.status !== "ready")
      throw new Error(`create failed: ${res.status} ${JSON.stringify(body)}`);
    create.push(performance.now() - t0);
    names.push(body.name);
  }
  // 10 creates at once.
  await waitForPool();
  const concurrent = await Promise.all(
    Array.from({ length: 10 }, async (_, i) => {
      const t0 = performance.now();
      const res = await fetch(`${platform.url}/v2/sandboxes/boxes`, {
        method: "POST",
        headers,
        body: JSON.stringify({ name: `bench-c-${i}` }),
      });
      if (res.status !== 201) throw new Error(`create failed: ${res.status} ${await res.text()}`);
      names.push(`bench-c-${i}`);
      return performance.now() - t0;
    }),
  );
  // Exec round trip through the HTTP data plane.
  const box = await (await fetch(`${platform.url}/v2/sandboxes/boxes/bench-0`, { headers })).json();
  const exec: number[] = [];
  for (let i = 0; i < EXECS; i++) {
    const t0 = performance.now();
    const res = await fetch(`${box.dataplane_url}/execute`, {
      method: "POST",
      headers,
      body: JSON.stringify({ command: "true", shell: "/bin/sh" }),
    });
    const body = await res.json();
    if (body.exit_code !== 0) throw new Error(`exec failed: ${JSON.stringify(body)}`);
    exec.push(performance.now() - t0);
  }
  for (const n of names) await fetch(`${platform.url}/v2/sandboxes/boxes/${n}`, { method: "DELETE", headers });

  // Memory per idle sandbox, as the kernel charges it to each sandbox's memory cgroup (processes,
  // page tables, kernel memory, page cache they touched): robust to whatever else the host runs.
  // Floor: the same number of bare bwrap sandboxes sleeping, in one cgroup of their own.
  const floorCg = memCgroup("wharf-bench-floor");
  fs.mkdirSync(floorCg, { recursive: true });
  const bare = Array.from({ length: IDLE }, () =>
    spawn(
      "sh",
      [
        "-c",
        `echo $$ > ${floorCg}/cgroup.procs && exec bwrap --die-with-parent ${BWRAP.join(" ")} /bin/sleep infinity`,
      ],
      { stdio: "ignore" },
    ),
  );
  await settle();
  const bareBytes = memUsage(floorCg) / IDLE;
  for (const b of bare) b.kill("SIGKILL");
  await settle();
  fs.rmdirSync(floorCg);
  const ids: string[] = [];
  for (let i = 0; i < IDLE; i++) {
    const res = await fetch(`${platform.url}/v2/sandboxes/boxes`, {
      method: "POST",
      headers,
      body: JSON.stringify({ name: `idle-${i}` }),
    });
    if (res.status !== 201) throw new Error(`idle create failed: ${res.status} ${await res.text()}`);
    ids.push((await res.json()).id);
  }
  await settle();
  const perBox = ids.reduce((sum, id) => sum + memUsage(memCgroup(`wharf/${id}`)), 0) / IDLE;

  // Restart: 45 running sandboxes re-adopted by a new platform process (start returns once done).
  for (let i = IDLE; i < RESTART_BOXES; i++) {
    const res = await fetch(`${platform.url}/v2/sandboxes/boxes`, {
      method: "POST",
      headers,
      body: JSON.stringify({ name: `idle-${i}` }),
    });
    if (res.status !== 201) throw new Error(`create failed: ${res.status} ${await res.text()}`);
  }
  await platform.stop();
  const r0 = performance.now();
  platform = await boot(createSandboxesFeature(featureEnv));
  const readopt = performance.now() - r0;
  const live = await (
    await fetch(`${platform.url}/v2/sandboxes/boxes?status=ready&limit=500`, { headers: { "x-api-key": key } })
  ).json();
  if (live.sandboxes.length < RESTART_BOXES)
    throw new Error(`only ${live.sandboxes.length} sandboxes ready after the restart`);
  for (const b of live.sandboxes)
    await fetch(`${platform.url}/v2/sandboxes/boxes/${b.name}`, { method: "DELETE", headers });

  const f50 = pct(floor, 50);
  console.log(
    `\nsandbox lifecycle on ${os.cpus().length} CPUs (load ${os.loadavg()[0].toFixed(1)}), ${feature.manager()!.driver!.describe()}, disk: ${feature.manager()!.settings.disk}, warm pool ${POOL}`,
  );
  console.log(`| measure | Wharf | floor (bare bwrap) | ratio | goal |`);
  console.log(`|---|---|---|---|---|`);
  console.log(
    `| create → ready p50 (n=${CREATES}) | ${ms(pct(create, 50))} | ${ms(f50)} | ${(pct(create, 50) / f50).toFixed(1)}× | ≤ 50 ms |`,
  );
  console.log(
    `| create → ready p90 | ${ms(pct(create, 90))} | ${ms(pct(floor, 90))} | ${(pct(create, 90) / pct(floor, 90)).toFixed(1)}× | ≤ 80 ms |`,
  );
  console.log(
    `| create → ready p99 | ${ms(pct(create, 99))} | ${ms(pct(floor, 99))} | ${(pct(create, 99) / pct(floor, 99)).toFixed(1)}× | |`,
  );
  console.log(
    `| 10 concurrent creates, p50 | ${ms(pct(concurrent, 50))} | ${ms(f50)} | ${(pct(concurrent, 50) / f50).toFixed(1)}× | ≤ 200 ms |`,
  );
  console.log(
    `| exec round trip p50, HTTP data plane (n=${EXECS}) | ${ms(pct(exec, 50))} | ${ms(f50)} | ${(pct(exec, 50) / f50).toFixed(1)}× | ≤ 10 ms |`,
  );
  console.log(
    `| exec round trip p99 | ${ms(pct(exec, 99))} | ${ms(pct(floor, 99))} | ${(pct(exec, 99) / pct(floor, 99)).toFixed(1)}× | |`,
  );
  console.log(`| platform start re-adopting ${RESTART_BOXES} running sandboxes | ${ms(readopt)} | | | ≤ 3 s |`);
  console.log(
    `| memory per idle sandbox (${IDLE} running) | ${mb(perBox)} | ${mb(bareBytes)} | ${(perBox / Math.max(1, bareBytes)).toFixed(1)}× | ≤ 5 MB |`,
  );
} finally {
  // Sandboxes outlive the platform here (KEEP_RUNNING): delete every one before stopping, also after an error.
  const left = await fetch(`${platform.url}/v2/sandboxes/boxes?limit=500`, { headers })
    .then((r) => r.json())
    .catch(() => ({ sandboxes: [] }));
  for (const b of left.sandboxes ?? [])
    await fetch(`${platform.url}/v2/sandboxes/boxes/${b.name}`, { method: "DELETE", headers });
  await platform.stop();
  fs.rmSync(home, { recursive: true, force: true });
}
