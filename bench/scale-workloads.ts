// Replica forwarding: a sandbox's data plane called on the replica that runs it (direct) and on
// another replica that forwards to it over its internal listener (forwarded), interleaved, in the
// same run: exec round trip p50/p99 and file upload/download throughput, each forwarded figure as
// a ratio of the direct one. Two `wharf up` replicas on loopback, PostgreSQL at
// $WHARF_TEST_DATABASE_URL (a schema of its own, dropped after). Needs root.
//   node bin/run-ts.js bench/scale-workloads.ts [--quick]
import crypto from "node:crypto";
import { launchReplicas } from "../test/scale/support.ts";

const quick = process.argv.includes("--quick");
const EXECS = quick ? 40 : 200;
const FILE_BYTES = (quick ? 8 : 32) * 1024 * 1024;
const FILE_REPS = quick ? 2 : 4;

if (process.getuid?.() !== 0) {
  console.error("replica benchmark: run as root (sandboxes need it)");
  process.exit(2);
}

const pct = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))];
};

const set = await launchReplicas(["a", "b"]);
try {
  const [a, b] = set.replicas;
  const headers = { "x-api-key": set.apiKey };
  const res = await fetch(`${a.url}/v2/sandboxes/boxes`, {
    method: "POST",
    headers: { ...headers, "content-type": "application/json" },
    body: JSON.stringify({ name: "bench" }),
  });
  const box = (await res.json()) as { id: string; status: string };
  if (box.status !== "ready") throw new Error(`sandbox not ready: ${JSON.stringify(box)}`);
  const dp = { direct: `${a.url}/sandboxes/dp/${box.id}`, forwarded: `${b.url}/sandboxes/dp/${box.id}` };

  const exec = async (base: string) => {
    const t0 = performance.now();
    const r = await fetch(`${base}/execute`, {
      method: "POST",
      headers: { ...headers, "content-type": "application/json" },
      body: JSON.stringify({ command: "true" }),
    });
    await r.arrayBuffer();
    if (r.status !== 200) throw new Error(`exec ${r.status}`);
    return performance.now() - t0;
  };
  const lat = { direct: [] as number[], forwarded: [] as number[] };
  for (let i = 0; i < 5; i++) await Promise.all([exec(dp.direct), exec(dp.forwarded)]); // warm-up: connections, caches
  for (let i = 0; i < EXECS; i++) {
    // Interleaved, alternating which goes first: load on the host hits both alike.
    const order = i % 2 ? (["direct", "forwarded"] as const) : (["forwarded", "direct"] as const);
    for (const k of order) lat[k].push(await exec(dp[k]));
  }

  const blob = crypto.randomBytes(FILE_BYTES);
  const upload = async (base: string) => {
    const form = new FormData();
    form.append("file", new Blob([blob]), "blob.bin");
    const t0 = performance.now();
    const r = await fetch(`${base}/upload?path=/home/user/blob.bin`, { method: "POST", headers, body: form });
    await r.arrayBuffer();
    if (r.status !== 200) throw new Error(`upload ${r.status}`);
    return performance.now() - t0;
  };
  const download = async (base: string) => {
    const t0 = performance.now();
    const r = await fetch(`${base}/download?path=/home/user/blob.bin`, { headers });
    const got = Buffer.from(await r.arrayBuffer());
    if (r.status !== 200 || got.length !== blob.length) throw new Error(`download ${r.status} ${got.length}`);
    return performance.now() - t0;
  };
  const up = { direct: [] as number[], forwarded: [] as number[] };
  const down = { direct: [] as number[], forwarded: [] as number[] };
  for (let i = 0; i < FILE_REPS; i++) {
    for (const k of i % 2 ? (["direct", "forwarded"] as const) : (["forwarded", "direct"] as const)) {
      up[k].push(await upload(dp[k]));
      down[k].push(await download(dp[k]));
    }
  }
  const mbps = (msList: number[]) => FILE_BYTES / 1024 / 1024 / (pct(msList, 50) / 1000);
  const row = (what: string, d: number, f: number, unit: string, higherIsBetter = false) =>
    console.log(
      `${what.padEnd(28)} direct ${d.toFixed(1).padStart(8)} ${unit}   forwarded ${f.toFixed(1).padStart(8)} ${unit}   ratio ${(higherIsBetter ? d / f : f / d).toFixed(2)}× (forwarded cost)`,
    );
  console.log(
    `replica forwarding, ${EXECS} execs each, ${FILE_REPS}× ${FILE_BYTES / 1024 / 1024} MiB files; load average ${(await import("node:os")).loadavg()[0].toFixed(1)}`,
  );
  row("exec round trip p50", pct(lat.direct, 50), pct(lat.forwarded, 50), "ms");
  row("exec round trip p99", pct(lat.direct, 99), pct(lat.forwarded, 99), "ms");
  row("upload throughput (p50)", mbps(up.direct), mbps(up.forwarded), "MB/s", true);
  row("download throughput (p50)", mbps(down.direct), mbps(down.forwarded), "MB/s", true);
  await fetch(`${a.url}/v2/sandboxes/boxes/bench`, { method: "DELETE", headers });
} finally {
  await set.close();
}
