import assert from "node:assert/strict";
import { execFileSync, spawn, type ChildProcess } from "node:child_process";
import fs from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { describe, test } from "node:test";
import { SandboxClient } from "langsmith-next/sandbox";
import { dockerReference, imageHost, isLoopbackHost } from "../../src/sandboxes/driver/oci-image.ts";
import { requireCapability } from "../support/requirements.ts";
import { startSandboxPlatform } from "./support.ts";

const onPath = (cmd: string) => ["/usr/bin", "/usr/sbin", "/bin"].some((d) => fs.existsSync(path.join(d, cmd)));

/** A small root filesystem from host binaries (bash, coreutils, their libraries) in two layers; the second deletes a file. */
function buildImage(dir: string): string {
  const layout = path.join(dir, "layout");
  const bundle = path.join(dir, "bundle");
  const run = (cmd: string, args: string[]) => execFileSync(cmd, args, { stdio: ["ignore", "ignore", "pipe"] });
  run("umoci", ["init", "--layout", layout]);
  run("umoci", ["new", "--image", `${layout}:t`]);
  run("umoci", ["unpack", "--image", `${layout}:t`, bundle]);
  const root = path.join(bundle, "rootfs");
  const bins = ["/usr/bin/bash", "/usr/bin/dash", "/usr/bin/sleep", "/usr/bin/cat", "/usr/bin/true", "/usr/bin/id", "/usr/bin/ls", "/usr/bin/env", "/usr/bin/test", "/usr/bin/echo", "/usr/bin/mkdir", "/usr/bin/tail", "/usr/bin/head", "/usr/bin/stat", "/usr/bin/mv", "/usr/bin/rm", "/usr/bin/dirname"];
  const libs = new Set<string>();
  for (const b of bins) for (const m of execFileSync("ldd", [b], { encoding: "utf8" }).matchAll(/(\/[^\s]+\.so[^\s]*)/g)) libs.add(m[1]);
  for (const f of [...bins, ...libs]) {
    const real = fs.realpathSync(f);
    const at = path.join(root, f.startsWith("/lib") ? `/usr${f}` : f);
    fs.mkdirSync(path.dirname(at), { recursive: true });
    fs.copyFileSync(real, at);
    fs.chmodSync(at, 0o755);
  }
  for (const l of ["bin", "lib", "lib64"]) if (!fs.existsSync(path.join(root, l))) fs.symlinkSync(`usr/${l}`, path.join(root, l));
  fs.mkdirSync(path.join(root, "usr/lib64"), { recursive: true });
  fs.symlinkSync("dash", path.join(root, "usr/bin/sh"));
  fs.mkdirSync(path.join(root, "etc"));
  fs.writeFileSync(path.join(root, "etc/layer1.txt"), "from the image\n");
  fs.writeFileSync(path.join(root, "etc/removed.txt"), "deleted by layer 2\n");
  run("umoci", ["repack", "--image", `${layout}:t`, bundle]);
  fs.rmSync(bundle, { recursive: true });
  run("umoci", ["unpack", "--image", `${layout}:t`, bundle]);
  fs.rmSync(path.join(bundle, "rootfs/etc/removed.txt"));
  run("umoci", ["repack", "--image", `${layout}:t`, bundle]);
  fs.rmSync(bundle, { recursive: true });
  return layout;
}

async function freePort(): Promise<number> {
  const s = net.createServer().listen(0, "127.0.0.1");
  await new Promise((r) => s.once("listening", r));
  const port = (s.address() as net.AddressInfo).port;
  await new Promise((r) => s.close(r));
  return port;
}

/** Debian's docker-registry on loopback, optionally behind htpasswd (bcrypt) credentials. */
async function startRegistry(dir: string, auth?: { user: string; password: string }): Promise<{ port: number; proc: ChildProcess }> {
  const port = await freePort();
  fs.mkdirSync(dir, { recursive: true });
  let authConf = "";
  if (auth) {
    const hash = execFileSync("python3", ["-W", "ignore", "-c", "import crypt,sys; print(crypt.crypt(sys.argv[1], crypt.mksalt(crypt.METHOD_BLOWFISH)))", auth.password], { encoding: "utf8" }).trim();
    fs.writeFileSync(path.join(dir, "htpasswd"), `${auth.user}:${hash}\n`);
    authConf = `auth:\n  htpasswd:\n    realm: test\n    path: ${path.join(dir, "htpasswd")}\n`;
  }
  fs.writeFileSync(path.join(dir, "config.yml"), `version: 0.1\nlog:\n  level: error\nstorage:\n  filesystem:\n    rootdirectory: ${path.join(dir, "data")}\nhttp:\n  addr: 127.0.0.1:${port}\n${authConf}`);
  const proc = spawn("docker-registry", ["serve", path.join(dir, "config.yml")], { stdio: "ignore" });
  for (let i = 0; i < 100; i++) {
    const up = await fetch(`http://127.0.0.1:${port}/v2/`).then(
      () => true,
      () => false,
    );
    if (up) return { port, proc };
    await new Promise((r) => setTimeout(r, 50));
  }
  proc.kill();
  throw new Error("docker-registry did not start");
}

describe("sandbox snapshots from OCI images", () => {
  test("image references", () => {
    const cases: Array<[string, string, string]> = [
      ["python:3.12-slim", "docker://docker.io/library/python:3.12-slim", "docker.io"],
      ["team/app:1", "docker://docker.io/team/app:1", "docker.io"],
      ["127.0.0.1:5000/small:1", "docker://127.0.0.1:5000/small:1", "127.0.0.1:5000"],
      ["registry.example.com/a/b@sha256:00", "docker://registry.example.com/a/b@sha256:00", "registry.example.com"],
      ["localhost/x", "docker://localhost/x", "localhost"],
    ];
    for (const [image, ref, host] of cases) {
      assert.equal(dockerReference(image), ref);
      assert.equal(imageHost(image), host);
    }
    assert.equal(isLoopbackHost("127.0.0.1:5000"), true);
    assert.equal(isLoopbackHost("registry.example.com"), false);
  });

  test("public and private registries on loopback: building → ready with a digest, whiteouts applied, egress like the base; registries CRUD with a sealed write-only password; capture on top of an image", async (t) => {
    if (!requireCapability(t, onPath("skopeo") && onPath("umoci") && onPath("docker-registry"), "snapshots from images need skopeo, umoci and docker-registry (scripts/setup-host.sh)")) return;
    const p = await startSandboxPlatform(t);
    if (!p) return;
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "wharf-images-"));
    const procs: ChildProcess[] = [];
    t.after(() => {
      for (const pr of procs) pr.kill();
      fs.rmSync(dir, { recursive: true, force: true });
    });
    const layout = buildImage(dir);
    const pub = await startRegistry(path.join(dir, "pub"));
    const priv = await startRegistry(path.join(dir, "priv"), { user: "robot", password: "s3cret-registry-pw" });
    procs.push(pub.proc, priv.proc);
    execFileSync("skopeo", ["copy", "--quiet", "--dest-tls-verify=false", `oci:${layout}:t`, `docker://127.0.0.1:${pub.port}/small:1`]);
    execFileSync("skopeo", ["copy", "--quiet", "--dest-tls-verify=false", "--dest-creds", "robot:s3cret-registry-pw", `oci:${layout}:t`, `docker://127.0.0.1:${priv.port}/team/private:2`]);

    const client = new SandboxClient({ apiEndpoint: `${p.url}/v2/sandboxes`, apiKey: p.apiKey, maxRetries: 0 });
    const snap = await client.createSnapshot("small", `127.0.0.1:${pub.port}/small:1`, 1 << 30, { timeout: 60 });
    assert.equal(snap.status, "ready");
    assert.match(String((snap as any).image_digest), /^sha256:[0-9a-f]{64}$/);
    assert.equal((snap as any).docker_image, `127.0.0.1:${pub.port}/small:1`);
    const sb = await client.createSandbox(snap.id, { name: "from-image" });
    const r = await sb.run('cat /etc/layer1.txt; test -e /etc/removed.txt && echo still-there || echo whiteout-applied; id -u; echo "$HOME"; echo "proxy=$HTTPS_PROXY"; test -s "$SSL_CERT_FILE" && echo ca-placed', { timeout: 20 });
    assert.equal(r.exit_code, 0, r.stderr);
    assert.equal(r.stdout, "from the image\nwhiteout-applied\n1000\n/home/user\nproxy=http://127.0.0.1:3128\nca-placed\n");

    // Capture on top of the image, then start a new sandbox from the capture.
    await sb.write("/home/user/made-here.txt", "mine\n");
    const captured = await sb.captureSnapshot("small-plus");
    const sb2 = await client.createSandbox(captured.id, { name: "from-capture" });
    assert.equal((await sb2.run("cat /etc/layer1.txt ~/made-here.txt", { timeout: 20 })).stdout, "from the image\nmine\n");
    assert.equal((await p.api(`/v2/sandboxes/snapshots/${snap.id}`, { method: "DELETE" })).status, 409, "an image in use stays");

    // Private: without credentials the build fails with the registry's reason; with a registry it works.
    await assert.rejects(client.createSnapshot("private-nocreds", `127.0.0.1:${priv.port}/team/private:2`, 1 << 30, { timeout: 60 }), (e: Error) => /fail|unauthorized|authentication/i.test(e.message));
    const failed = (await client.listSnapshots()).find((s) => s.name === "private-nocreds")!;
    assert.equal(failed.status, "failed");
    assert.match(String(failed.status_message), /unauthorized|authentication/i);
    const reg = await client.registries.create({ name: "private", url: `http://127.0.0.1:${priv.port}`, username: "robot", password: "s3cret-registry-pw" });
    assert.equal((reg as any).password, undefined, "the password is write-only");
    assert.equal((await client.registries.retrieve("private")).url, `http://127.0.0.1:${priv.port}`);
    assert.equal((await client.registries.list()).registries?.length, 1);
    const stored = await p.ctx.db.selectFrom("sandbox_registries").selectAll().executeTakeFirstOrThrow();
    assert.ok(!JSON.stringify(stored).includes("s3cret-registry-pw"), "sealed at rest");
    assert.ok(!p.logs().includes("s3cret-registry-pw"), "never logged");
    const privSnap = await client.createSnapshot("private-ok", `127.0.0.1:${priv.port}/team/private:2`, 1 << 30, { registryId: reg.id, timeout: 60 });
    assert.equal(privSnap.status, "ready");
    await client.registries.update("private", { password: "wrong" });
    await assert.rejects(client.createSnapshot("private-wrong", `127.0.0.1:${priv.port}/team/private:2`, 1 << 30, { registryId: reg.id, timeout: 60 }));
    await client.registries.delete("private");
    assert.equal((await client.registries.list()).registries?.length, 0);

    // A bad reference fails with a reason, never a 500.
    await assert.rejects(client.createSnapshot("nothing-there", `127.0.0.1:${pub.port}/absent:1`, 1 << 30, { timeout: 60 }));
    const res = await p.api("/v2/sandboxes/snapshots", { method: "POST", json: { name: "x", docker_image: "bad ref!", fs_capacity_bytes: 1 << 30 } });
    assert.equal(res.status, 422);
  });
});
