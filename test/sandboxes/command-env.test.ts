import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import fs from "node:fs";
import { describe, test } from "node:test";
import { startSandboxPlatform } from "./support.ts";

/** Every host process whose command line contains `needle` (any local user can read these). */
function cmdlinesContaining(needle: string): string[] {
  const hits: string[] = [];
  for (const pid of fs.readdirSync("/proc").filter((d) => /^\d+$/.test(d))) {
    let cmdline: string;
    try {
      cmdline = fs.readFileSync(`/proc/${pid}/cmdline`, "utf8");
    } catch {
      continue; // exited meanwhile
    }
    if (cmdline.includes(needle)) hits.push(`${pid}: ${cmdline.replaceAll("\0", " ").slice(0, 200)}`);
  }
  return hits;
}

describe("sandbox commands' environment", () => {
  test("a sandbox's secret env var reaches its command but no host process's command line", async (t) => {
    const p = await startSandboxPlatform(t);
    if (!p) return;
    const secret = `wharf-env-secret-${randomBytes(12).toString("hex")}`;
    const box = await p.create({ name: "envsecret", env_vars: { API_TOKEN: secret } });

    const running = p.exec(box, "sleep 3; echo token=$API_TOKEN");
    // The attacker: any local user listing processes while the command runs.
    let seen: string[] = [];
    const until = Date.now() + 2500;
    while (Date.now() < until && seen.length === 0) {
      seen = cmdlinesContaining(secret);
      await new Promise((r) => setTimeout(r, 50));
    }
    const r = await running;
    assert.equal(r.status, 200);
    assert.match(r.body.stdout as string, new RegExp(`token=${secret}`), "the command still gets its environment");
    assert.deepEqual(seen, [], "no host process shows the secret on its command line");
    // The descriptor the environment came on is closed before the command runs.
    const fds = await p.exec(box, "exec ls -l /proc/self/fd");
    assert.doesNotMatch(fds.body.stdout as string, / 4 -> /);
  });
});
