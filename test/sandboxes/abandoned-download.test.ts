import assert from "node:assert/strict";
import net from "node:net";
import { describe, test } from "node:test";
import { startSandboxPlatform } from "./support.ts";

/** Reads `bytes` of a GET of `url` over a raw socket, then hangs up (the client goes away mid-body). */
function readThenHangUp(url: string, bytes: number): Promise<number> {
  const u = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = net.connect(Number(u.port), u.hostname);
    let got = 0;
    socket.on("connect", () => socket.write(`GET ${u.pathname} HTTP/1.1\r\nHost: ${u.host}\r\n\r\n`));
    socket.on("data", (d: Buffer) => {
      got += d.length;
      if (got >= bytes) {
        socket.destroy();
        resolve(got);
      }
    });
    socket.on("error", reject);
    socket.on("close", () => resolve(got));
  });
}

describe("abandoned downloads", () => {
  test("reading 64 KiB of a download link and hanging up, 20 times, leaves the platform serving", async (t) => {
    const p = await startSandboxPlatform(t);
    if (!p) return;
    // An error thrown from a stream's event handler would reach here (and, in `wharf up`, end the process).
    const uncaught: unknown[] = [];
    const record = (err: unknown) => uncaught.push(err);
    process.on("uncaughtException", record);
    t.after(() => process.off("uncaughtException", record));

    const box = await p.create({ name: "dl" });
    const made = await p.exec(box, "head -c 8388608 /dev/urandom > big.bin && echo ok");
    assert.equal(made.body.stdout, "ok\n");
    const res = await p.api("/v2/sandboxes/boxes/dl/download-url", { method: "POST", json: { path: "big.bin" } });
    assert.equal(res.status, 200);
    const { download_url } = (await res.json()) as { download_url: string };

    for (let i = 0; i < 20; i++) {
      const got = await readThenHangUp(download_url, 64 * 1024);
      assert.ok(got >= 64 * 1024, `attempt ${i}: read ${got} bytes`);
      // Give the reader's end (and any throw from it) time to happen before the next attempt.
      await new Promise((r) => setTimeout(r, 50));
    }
    await new Promise((r) => setTimeout(r, 500));

    assert.deepEqual(
      uncaught.map((e) => String(e)),
      [],
      "nothing was thrown outside a request",
    );
    const again = await p.api("/v2/sandboxes/boxes/dl");
    assert.equal(again.status, 200);
    assert.equal(((await again.json()) as { status: string }).status, "ready");
    const whole = await fetch(download_url);
    assert.equal(whole.status, 200);
    assert.equal((await whole.arrayBuffer()).byteLength, 8 * 1024 * 1024);
  });
});
