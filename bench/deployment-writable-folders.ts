// What showing a build step's writable folders (the build, the npm cache, a Python environment's
// staging folder) as overlays whose upper layer is the folder itself costs, against a plain bind of
// the same folder (which shows the folder's host path in the step's mount table). The step is
// write-heavy as an install is: it copies a package tree of ~3,300 files (`@langchain/core`) into
// the folder, lists it and removes it. Both ways alternate in the same run; root needed.
//   node bin/run-ts.js bench/deployment-writable-folders.ts [--quick]
import crypto from "node:crypto";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { Launcher } from "../src/confinement/launcher.ts";
import { runtimeBinds } from "../src/deployments/confinement/confinement.ts";

const quick = process.argv.includes("--quick");
const rounds = quick ? 2 : 5;
if (process.getuid?.() !== 0) {
  console.log("skipped: confining a step needs root");
  process.exit(0);
}
const root = fs.mkdtempSync(path.join(os.tmpdir(), "wharf-bench-writable-"));
const work = path.join(root, "builds", "b");
fs.mkdirSync(work, { recursive: true });
fs.chownSync(work, 399_998, 399_998);
const launcher = new Launcher({
  isolation: true,
  scratchRoot: path.join(root, "scratch"),
  baseCacheDir: process.env.WHARF_SANDBOX_BASE_CACHE || path.join(os.tmpdir(), "wharf-test-base-images"),
});
const step =
  "cp -r /opt/wharf/node_modules/@langchain/core /w/core && find /w/core -type f | wc -l >/dev/null && rm -rf /w/core";

async function once(asBind: boolean): Promise<number> {
  const started = performance.now();
  const p = await launcher.launch({
    id: `dep-bench-${crypto.randomBytes(4).toString("hex")}`,
    uid: 399_998,
    limits: { memBytes: 512 * 1024 * 1024, cpuMillicores: 1000, pidsMax: 64 },
    plan: {
      binds: [
        ...runtimeBinds(),
        { src: work, dest: "/w", rw: true, beneath: path.join(root, "builds"), sockets: asBind },
      ],
      symlinks: [],
    },
    argv: ["/bin/sh", "-c", step],
    env: { PATH: "/usr/bin:/bin" },
    cwd: "/",
  });
  const code = await p.exited;
  await p.stop(0);
  if (code !== 0) throw new Error(`the step failed (exit ${code})`);
  return performance.now() - started;
}

try {
  await once(false); // warm the base image and the page cache
  const times = { bind: [] as number[], overlay: [] as number[] };
  for (let i = 0; i < rounds; i++) {
    times.bind.push(await once(true));
    times.overlay.push(await once(false));
  }
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
  const bind = median(times.bind);
  const overlay = median(times.overlay);
  console.log(`confined step copying @langchain/core into a writable folder, median of ${rounds}:`);
  console.log(`  plain bind (baseline, shows the host path): ${bind.toFixed(0)} ms`);
  console.log(
    `  overlay with the folder as upper layer:     ${overlay.toFixed(0)} ms  (ratio ${(overlay / bind).toFixed(2)})`,
  );
} finally {
  fs.rmSync(root, { recursive: true, force: true });
}
