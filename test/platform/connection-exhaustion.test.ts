import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import readline from "node:readline";
import { describe, test } from "node:test";
import { fileURLToPath } from "node:url";
import { startTestPlatform } from "../support/platform.ts";
import { requireCapability } from "../support/requirements.ts";

const FLOOD = path.join(path.dirname(fileURLToPath(import.meta.url)), "fixtures/slow-heads.mjs");

interface FloodReport {
  ms: number;
  opened: number;
  open: number;
  closed: number;
  answered408: number;
}

function openFilesLimit(): number {
  return Number(/Max open files\s+(\d+)/.exec(fs.readFileSync("/proc/self/limits", "utf8"))![1]);
}

function setOpenFilesLimit(soft: number): void {
  const r = spawnSync("prlimit", ["--pid", String(process.pid), `--nofile=${soft}:`]);
  if (r.status !== 0) throw new Error(`prlimit failed: ${r.stderr}`);
}

describe("connection exhaustion", () => {
  test("2,500 slowly sent request heads from 50 loopback addresses: an authenticated client is still answered, slow heads are closed after the header timeout", async (t) => {
    const hasPrlimit = spawnSync("prlimit", ["--version"]).status === 0;
    if (
      !requireCapability(
        t,
        process.platform === "linux" && hasPrlimit,
        "needs Linux and prlimit (util-linux) to lower this process's descriptor limit",
      )
    )
      return;
    const p = await startTestPlatform(t, {
      env: { WHARF_MAX_CONNECTIONS: "300", WHARF_HEADERS_TIMEOUT_MS: "2000" },
    });
    if (!p) return;
    // The flood runs in a child (its descriptors do not count); the platform runs in this process,
    // whose descriptor limit is lowered below the flood's size, as the real platform's was.
    const soft = openFilesLimit();
    setOpenFilesLimit(1500);
    t.after(() => setOpenFilesLimit(soft));

    const port = new URL(p.url).port;
    const addresses = Array.from({ length: 50 }, (_, i) => `127.0.0.${i + 2}`);
    const flood = spawn(process.execPath, [FLOOD, port, addresses.join(","), "50", "15"], {
      stdio: ["ignore", "pipe", "inherit"],
    });
    t.after(() => flood.kill("SIGKILL"));
    let last: FloodReport = { ms: 0, opened: 0, open: 0, closed: 0, answered408: 0 };
    readline.createInterface({ input: flood.stdout! }).on("line", (l) => (last = JSON.parse(l) as FloodReport));
    const until = async (cond: () => boolean, ms: number) => {
      const end = Date.now() + ms;
      while (!cond() && Date.now() < end) await new Promise((r) => setTimeout(r, 50));
      return cond();
    };
    await until(() => last.opened >= 2500, 5000);

    // While the flood holds its connections: the platform answers an authenticated client.
    for (let i = 0; i < 5; i++) {
      const res = await p.api("/v2/secrets", { signal: AbortSignal.timeout(5000) });
      assert.equal(res.status, 200, `request ${i}`);
      await res.arrayBuffer();
    }
    const during = last;
    assert.ok(during.opened >= 2000, `the flood connected (${JSON.stringify(during)})`);

    // Heads still unfinished after WHARF_HEADERS_TIMEOUT_MS (2 s) are answered 408 and closed.
    assert.ok(await until(() => last.open === 0, 8000), `every slow head was closed: ${JSON.stringify(last)}`);
    assert.ok(
      last.answered408 > 0,
      `some were closed by the header timeout (the rest by the caps): ${JSON.stringify(last)}`,
    );
    const res = await p.api("/v2/secrets");
    assert.equal(res.status, 200);
  });
});
