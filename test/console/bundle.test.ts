import assert from "node:assert/strict";
import fs from "node:fs";
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
  const lazy = fs.readdirSync(path.join(CONSOLE_DIST, "assets")).filter((f) => f.endsWith(".js") && !first.includes(`assets/${f}`));
  assert.ok(lazy.some((f) => f.startsWith("Terminal")) && lazy.some((f) => f.startsWith("Playground")), "terminal and playground load on demand");
});
