#!/usr/bin/env node
// `npm run lint`: ESLint on one core alongside Prettier, then the perl and cycle checks, on the other.
// ESLint's type-aware rules build one TypeScript program, so `--concurrency` would build it once per
// thread for little gain on CI's two cores; side by side, the whole lint takes about as long as ESLint
// alone. Every check runs even when another fails; each one's output is printed whole when it ends.
import { spawn } from "node:child_process";
import path from "node:path";

const root = path.join(path.dirname(new URL(import.meta.url).pathname), "..");
const bin = (name) => path.join(root, "node_modules", ".bin", name);
const npm = process.env.npm_execpath
  ? [process.execPath, process.env.npm_execpath]
  : [process.platform === "win32" ? "npm.cmd" : "npm"];

const lanes = [
  [[bin("eslint"), "."]],
  [
    [...npm, "run", "-s", "format:check"],
    [process.execPath, "scripts/check-perl.mjs"],
    [process.execPath, "scripts/check-cycles.mjs"],
  ],
];

function run([cmd, ...args]) {
  return new Promise((resolve) => {
    const child = spawn(cmd, args, { cwd: root, stdio: ["ignore", "pipe", "pipe"] });
    let out = "";
    let err = "";
    child.stdout.setEncoding("utf8").on("data", (c) => (out += c));
    child.stderr.setEncoding("utf8").on("data", (c) => (err += c));
    child.on("error", (e) => {
      err += `${e.message}\n`;
    });
    child.on("close", (code, signal) => {
      process.stdout.write(out);
      process.stderr.write(err);
      const ok = code === 0 && !signal;
      if (!ok) console.error(`lint: ${path.basename(cmd)} ${args.join(" ")} failed (${code ?? signal})`);
      resolve(ok);
    });
  });
}

const results = await Promise.all(
  lanes.map(async (lane) => {
    let ok = true;
    for (const command of lane) ok = (await run(command)) && ok;
    return ok;
  }),
);
process.exit(results.every(Boolean) ? 0 : 1);
