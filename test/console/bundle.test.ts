import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import crypto from "node:crypto";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import zlib from "node:zlib";
import { test } from "node:test";
import { CONSOLE_DIST } from "../../src/console/index.ts";
import { ensureConsoleBuilt } from "./support/browser.ts";

const LIMIT = 300 * 1024;

test("the console's first load is at most 300 KB of compressed JavaScript, with no inline script", () => {
  ensureConsoleBuilt();
  const html = fs.readFileSync(path.join(CONSOLE_DIST, "index.html"), "utf8");
  assert.doesNotMatch(html, /<script(?![^>]*\bsrc=)[^>]*>/, "no inline <script>");
  // Everything the page loads before it is interactive: entry scripts and module preloads.
  const first = [...html.matchAll(/(?:src|href)="\/console\/(assets\/[^"]+\.js)"/g)].map((m) => m[1]);
  assert.ok(first.length > 0);
  let gz = 0;
  for (const rel of first) gz += zlib.gzipSync(fs.readFileSync(path.join(CONSOLE_DIST, rel)), { level: 9 }).length;
  console.log(`first load: ${first.join(", ")} = ${(gz / 1024).toFixed(1)} KB gzip (limit ${LIMIT / 1024} KB)`);
  assert.ok(gz <= LIMIT, `first load is ${gz} bytes gzip`);
  const lazy = fs
    .readdirSync(path.join(CONSOLE_DIST, "assets"))
    .filter((f) => f.endsWith(".js") && !first.includes(`assets/${f}`));
  assert.ok(
    lazy.some((f) => f.startsWith("Terminal")) &&
      lazy.some((f) => f.startsWith("Playground")) &&
      lazy.some((f) => f.startsWith("Studio")),
    "terminal, playground and Studio load on demand",
  );
  const studio = lazy
    .filter((f) => f.startsWith("Studio"))
    .reduce((n, f) => n + zlib.gzipSync(fs.readFileSync(path.join(CONSOLE_DIST, "assets", f)), { level: 9 }).length, 0);
  console.log(`Studio chunk (graph drawing and layout): ${(studio / 1024).toFixed(1)} KB gzip`);
  assert.ok(studio <= 150 * 1024, `the Studio chunk is ${studio} bytes gzip`);
});

test("the build is reproducible: two builds give the same files", () => {
  const vite = path.join(path.dirname(CONSOLE_DIST), "..", "node_modules", "vite", "bin", "vite.js");
  const hashes = (dir: string) =>
    (fs.readdirSync(dir, { recursive: true }) as string[])
      .filter((rel) => fs.statSync(path.join(dir, rel)).isFile())
      .map(
        (rel) =>
          `${rel} ${crypto
            .createHash("sha256")
            .update(fs.readFileSync(path.join(dir, rel)))
            .digest("hex")}`,
      )
      .sort();
  const outs = [0, 1].map(() => {
    const out = fs.mkdtempSync(path.join(os.tmpdir(), "wharf-console-build-"));
    const r = spawnSync(
      process.execPath,
      [vite, "build", "-c", "console/vite.config.ts", "--outDir", out, "--emptyOutDir"],
      { cwd: path.join(path.dirname(CONSOLE_DIST), ".."), encoding: "utf8" },
    );
    assert.equal(r.status, 0, r.stderr);
    return out;
  });
  try {
    assert.deepEqual(hashes(outs[0]), hashes(outs[1]));
  } finally {
    for (const o of outs) fs.rmSync(o, { recursive: true, force: true });
  }
});
