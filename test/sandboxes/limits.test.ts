import assert from "node:assert/strict";
import fs from "node:fs";
import { describe, test } from "node:test";
import WebSocket from "ws";
import { HeadBuffer, SpillBuffer } from "../../src/sandboxes/dataplane/output-buffer.ts";
import { startSandboxPlatform } from "./support.ts";

describe("sandbox limits", () => {
  test("output buffers: the HTTP head cuts on a character boundary; the spill keeps offsets across segments", () => {
    const h = new HeadBuffer(5);
    h.append(Buffer.from("abcé"));
    h.append(Buffer.from("zzz"));
    assert.equal(h.text(), "abcé");
    assert.equal(h.truncated, true);
    const dir = fs.mkdtempSync("/tmp/wharf-spill-");
    const s = new SpillBuffer(256 * 1024, dir, "x");
    let all = "";
    for (let i = 0; i < 100; i++) {
      const piece = `${i}:${"é".repeat(1000)}\n`;
      all += piece;
      s.append(Buffer.from(piece));
    }
    s.end();
    const total = Buffer.byteLength(all);
    const replay = s.since(0);
    const got = replay.map((c) => c.data).join("");
    assert.ok(
      got.length > 0 && all.endsWith(got),
      "the newest output is kept, the oldest segments dropped past the cap",
    );
    assert.equal(replay[0].offset, total - Buffer.byteLength(got));
    const tail = s.since(total - 10);
    assert.equal(
      tail.map((c) => c.data).join(""),
      Buffer.from(all)
        .subarray(total - 10)
        .toString(),
    );
    s.dispose();
    assert.deepEqual(fs.readdirSync(dir), []);
    fs.rmSync(dir, { recursive: true });
  });

  test("fs_capacity_bytes is a hard limit by default: a full disk is ENOSPC inside the box and nothing else; warm boxes have the default capacity", async (t) => {
    const p = await startSandboxPlatform(t);
    if (!p) return;
    assert.equal(p.manager().settings.disk, "image");
    const small = await p.create({ name: "small-disk", fs_capacity_bytes: 64 * 1024 * 1024 });
    const freeBefore = fs.statfsSync(p.home).bavail * fs.statfsSync(p.home).bsize;
    const r = await p.exec(
      small,
      "for i in 1 2 3 4 5 6 7 8; do head -c 30000000 /dev/zero > ~/f$i || { echo full-at-$i; break; }; done 2>&1; df -B1M --output=size ~ | tail -1",
      { timeout: 60 },
    );
    assert.match(r.body.stdout, /No space left on device/);
    assert.match(r.body.stdout, /full-at-[1-3]/);
    const freeAfter = fs.statfsSync(p.home).bavail * fs.statfsSync(p.home).bsize;
    assert.ok(
      freeBefore - freeAfter < 100 << 20,
      `the host lost ${Math.round((freeBefore - freeAfter) / 2 ** 20)} MB for a 64 MB box`,
    );
    // The box still works (it can delete and write again); the platform too.
    assert.equal((await p.exec(small, "rm -f ~/f*; echo ok > ~/again && cat ~/again")).body.stdout, "ok\n");
    const warm = await p.create({ name: "default-disk" });
    const sizeOut = await p.exec(warm, "df -B1G --output=size ~ | tail -1");
    const size = Number(sizeOut.body.stdout.trim());
    assert.ok(size >= 9 && size <= 10, `default capacity ${size} GiB: ${JSON.stringify(sizeOut.body)}`);

    // After a crash the launchers of running commands are orphans: re-adoption ends them.
    const row = await p.ctx.db.selectFrom("sandboxes").selectAll().where("id", "=", warm.id).executeTakeFirstOrThrow();
    const ref = JSON.parse(row.runtime!);
    const orphan = p.manager().driver!.exec(warm.id, ref, { argv: ["/bin/sleep", "30"], env: {}, cwd: "/" });
    orphan.stdin.end();
    orphan.stdout.resume();
    orphan.stderr.resume();
    await new Promise((r) => setTimeout(r, 300));
    assert.equal(p.manager().driver!.endOrphanedCommands!(warm.id, ref), 1);
    assert.notEqual(await orphan.exited, 0);
  });

  test("a command printing 100 MB over HTTP: truncated, bounded memory; over WebSocket it streams whole and replays from disk", async (t) => {
    const p = await startSandboxPlatform(t);
    if (!p) return;
    const box = await p.create({ name: "loud" });
    const before = process.memoryUsage().rss;
    const r = await p.exec(box, "head -c 100000000 /dev/zero | tr '\\0' a; echo done >&2", { timeout: 120 });
    const grew = process.memoryUsage().rss - before;
    assert.equal(r.status, 200);
    assert.equal(r.body.exit_code, 0);
    assert.equal(r.body.truncated, true);
    assert.equal(r.body.stdout.length, 16 << 20);
    assert.equal(r.body.stderr, "done\n");
    assert.ok(grew < 200 << 20, `the platform grew by ${Math.round(grew / 2 ** 20)} MB for one command`);
    const small = await p.exec(box, "echo hi");
    assert.equal(small.body.truncated, undefined);

    // WebSocket: 5 MB streamed, the client drops, then replays everything from offset 0 (from disk).
    const url = `${box.dataplane_url.replace(/^http/, "ws")}/execute/ws`;
    const first = new WebSocket(url, { headers: { "X-Api-Key": p.apiKey } });
    const commandId = await new Promise<string>((resolve, reject) => {
      first.on("open", () =>
        first.send(JSON.stringify({ type: "execute", command: "head -c 5000000 /dev/zero | tr '\\0' b; sleep 0.5" })),
      );
      first.on("message", (d) => {
        const m = JSON.parse(d.toString());
        if (m.type === "started") resolve(m.command_id);
      });
      first.on("error", reject);
    });
    first.terminate();
    await new Promise((res) => setTimeout(res, 1500));
    const spill = p.manager().commandOutputDir(box.id);
    assert.ok(fs.readdirSync(spill).length > 0, "output kept on disk, not in memory");
    const again = new WebSocket(url, { headers: { "X-Api-Key": p.apiKey } });
    let bytes = 0;
    let exit: any = null;
    await new Promise<void>((resolve, reject) => {
      again.on("open", () =>
        again.send(JSON.stringify({ type: "reconnect", command_id: commandId, stdout_offset: 0, stderr_offset: 0 })),
      );
      again.on("message", (d) => {
        const m = JSON.parse(d.toString());
        if (m.type === "stdout") {
          assert.equal(m.offset, bytes);
          bytes += Buffer.byteLength(m.data);
        }
        if (m.type === "exit") {
          exit = m;
          resolve();
        }
      });
      again.on("error", reject);
    });
    assert.equal(bytes, 5_000_000);
    assert.equal(exit.exit_code, 0);
  });
});
