import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import fs from "node:fs";
import { describe, test } from "node:test";
import { tempHome } from "../support/dialects.ts";
import { freePort, WHARF_BIN, waitForOk } from "../support/process.ts";

const childrenOf = (pid: number): number[] => {
  try {
    return fs.readFileSync(`/proc/${pid}/task/${pid}/children`, "utf8").trim().split(/\s+/).filter(Boolean).map(Number);
  } catch {
    return [];
  }
};
const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return !fs.readFileSync(`/proc/${pid}/stat`, "utf8").includes(") Z ");
  } catch {
    return false;
  }
};
const openFiles = (pid: number) =>
  /Max open files\s+(\d+)\s+(\d+)/
    .exec(fs.readFileSync(`/proc/${pid}/limits`, "utf8"))!
    .slice(1)
    .map(Number);

async function until<T>(what: string, ms: number, probe: () => T | null | undefined | false): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = probe();
    if (v) return v;
    if (Date.now() > end) throw new Error(`${what} within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe("wharf up supervises the platform", () => {
  test("the platform process killed from elsewhere is started again; SIGTERM stops both; the descriptor limit is raised to the hard limit", async (t) => {
    if (process.platform !== "linux") return t.skip("reads /proc");
    const port = String(await freePort());
    const base = `http://127.0.0.1:${port}`;
    // Started with a low soft limit on descriptors, as a login shell's 1024 would be.
    const up = spawn("sh", ["-c", `ulimit -Sn 1024 && exec "${process.execPath}" "${WHARF_BIN}" up`], {
      cwd: tempHome("wharf-supervisor-"),
      env: {
        ...process.env,
        WHARF_PORT: port,
        WHARF_SANDBOX_DRIVER: "none",
        WHARF_EXAMPLE_PROJECT: "off",
        WHARF_AGENT_PROJECT: "off",
        WHARF_LOG_LEVEL: "info",
      },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let out = "";
    up.stdout!.on("data", (d) => (out += d));
    up.stderr!.on("data", (d) => (out += d));
    const exited = new Promise<number | null>((r) => up.once("exit", (code) => r(code)));
    t.after(() => {
      for (const pid of childrenOf(up.pid!)) process.kill(pid, "SIGKILL");
      up.kill("SIGKILL");
    });
    await waitForOk(`${base}/ok`, 60_000).catch((err) => assert.fail(`${err.message}\n${out}`));
    const first = await until("the platform child", 5000, () => childrenOf(up.pid!)[0]);
    const [soft, hard] = openFiles(first);
    assert.equal(soft, hard, "the platform runs at the hard descriptor limit");

    // A fatal fault (here SIGKILL from elsewhere) ends the platform process: it is started again.
    process.kill(first, "SIGKILL");
    const second = await until("a new platform child", 30_000, () => childrenOf(up.pid!).find((p) => p !== first));
    await waitForOk(`${base}/ok`, 60_000).catch((err) => assert.fail(`${err.message}\n${out}`));
    assert.match(out, /the platform process ended unexpectedly; starting it again/);
    assert.ok(alive(up.pid!), "wharf up itself kept running");

    up.kill("SIGTERM");
    assert.equal(await exited, 0, out);
    assert.ok(!alive(second), "the platform stopped with it");
    assert.match(out, /shutting down/);
  });

  test("kill -9 of wharf up ends the platform at once (nothing is left holding the port)", async (t) => {
    if (process.platform !== "linux") return t.skip("reads /proc");
    const port = String(await freePort());
    const up = spawn(process.execPath, [WHARF_BIN, "up"], {
      cwd: tempHome("wharf-supervisor-"),
      env: {
        ...process.env,
        WHARF_PORT: port,
        WHARF_SANDBOX_DRIVER: "none",
        WHARF_EXAMPLE_PROJECT: "off",
        WHARF_AGENT_PROJECT: "off",
      },
      stdio: ["ignore", "ignore", "ignore"],
    });
    t.after(() => up.kill("SIGKILL"));
    await waitForOk(`http://127.0.0.1:${port}/ok`, 60_000);
    const child = await until("the platform child", 5000, () => childrenOf(up.pid!)[0]);
    up.kill("SIGKILL");
    await until("the platform child's end", 5000, () => !alive(child));
  });
});
