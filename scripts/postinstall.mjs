#!/usr/bin/env node
// After `npm install`: build the web console, then make the host ready for sandboxes when we can
// (root on Debian/Ubuntu), otherwise say exactly what to run. Never fails the install: the rest of
// Wharf works without either.
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

// The console's build tools are dev dependencies: present after `npm install`/`npm ci` in a clone.
const root = path.join(path.dirname(fileURLToPath(import.meta.url)), "..");
const vite = path.join(root, "node_modules", "vite", "bin", "vite.js");
if (fs.existsSync(vite) && fs.existsSync(path.join(root, "console", "vite.config.ts"))) {
  const b = spawnSync(process.execPath, [vite, "build", "-c", "console/vite.config.ts"], {
    stdio: "inherit",
    cwd: root,
  });
  if (b.status !== 0)
    console.warn(`wharf: building the console failed (exit ${b.status}); retry with: npm run build:console`);
}

const script = path.join(path.dirname(fileURLToPath(import.meta.url)), "setup-host.sh");
if (process.platform !== "linux" || process.env.WHARF_SKIP_HOST_SETUP === "1") process.exit(0);
const isRoot = typeof process.getuid === "function" && process.getuid() === 0;
const hasApt = spawnSync("sh", ["-c", "command -v apt-get"], { stdio: "ignore" }).status === 0;
if (!isRoot || !hasApt) {
  console.log(`wharf: sandboxes need a few Debian packages (bubblewrap, …); run once: sudo ${script}`);
  process.exit(0);
}
const r = spawnSync(script, { stdio: "inherit" });
if (r.status !== 0)
  console.warn(
    `wharf: host setup for sandboxes failed (exit ${r.status}); sandboxes will answer 503 naming what is missing. Retry: ${script}`,
  );
