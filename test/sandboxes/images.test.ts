import assert from "node:assert/strict";
import { execFileSync, type ChildProcess } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { describe, test } from "node:test";
import { SandboxClient } from "langsmith-next/sandbox";
import { dockerReference, imageHost, isLoopbackHost } from "../../src/sandboxes/driver/oci-image.ts";
import { requireCapability } from "../support/requirements.ts";
import { buildImage, onPath, startRegistry } from "./registry-support.ts";
import { startSandboxPlatform } from "./support.ts";

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
    if (
      !requireCapability(
        t,
        onPath("skopeo") && onPath("umoci") && onPath("docker-registry"),
        "snapshots from images need skopeo, umoci and docker-registry (scripts/setup-host.sh)",
      )
    )
      return;
    // The registries are on loopback: pulls reach them only because the operator allows that range.
    const p = await startSandboxPlatform(t, { platformEnv: { WHARF_EGRESS_ALLOW_INTERNAL: "127.0.0.0/8" } });
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
    execFileSync("skopeo", [
      "copy",
      "--quiet",
      "--dest-tls-verify=false",
      `oci:${layout}:t`,
      `docker://127.0.0.1:${pub.port}/small:1`,
    ]);
    execFileSync("skopeo", [
      "copy",
      "--quiet",
      "--dest-tls-verify=false",
      "--dest-creds",
      "robot:s3cret-registry-pw",
      `oci:${layout}:t`,
      `docker://127.0.0.1:${priv.port}/team/private:2`,
    ]);

    const client = new SandboxClient({ apiEndpoint: `${p.url}/v2/sandboxes`, apiKey: p.apiKey, maxRetries: 0 });
    const snap = await client.createSnapshot("small", `127.0.0.1:${pub.port}/small:1`, 1 << 30, { timeout: 60 });
    assert.equal(snap.status, "ready");
    assert.match(String((snap as any).image_digest), /^sha256:[0-9a-f]{64}$/);
    assert.equal((snap as any).docker_image, `127.0.0.1:${pub.port}/small:1`);
    const sb = await client.createSandbox(snap.id, { name: "from-image" });
    const r = await sb.run(
      'cat /etc/layer1.txt; test -e /etc/removed.txt && echo still-there || echo whiteout-applied; id -u; echo "$HOME"; echo "proxy=$HTTPS_PROXY"; test -s "$SSL_CERT_FILE" && echo ca-placed',
      { timeout: 20 },
    );
    assert.equal(r.exit_code, 0, r.stderr);
    assert.equal(
      r.stdout,
      "from the image\nwhiteout-applied\n1000\n/home/user\nproxy=http://127.0.0.1:3128\nca-placed\n",
    );

    // Capture on top of the image, then start a new sandbox from the capture.
    await sb.write("/home/user/made-here.txt", "mine\n");
    const captured = await sb.captureSnapshot("small-plus");
    const sb2 = await client.createSandbox(captured.id, { name: "from-capture" });
    assert.equal(
      (await sb2.run("cat /etc/layer1.txt ~/made-here.txt", { timeout: 20 })).stdout,
      "from the image\nmine\n",
    );
    assert.equal(
      (await p.api(`/v2/sandboxes/snapshots/${snap.id}`, { method: "DELETE" })).status,
      409,
      "an image in use stays",
    );

    // Private: without credentials the build fails with the registry's reason; with a registry it works.
    await assert.rejects(
      client.createSnapshot("private-nocreds", `127.0.0.1:${priv.port}/team/private:2`, 1 << 30, { timeout: 60 }),
      (e: Error) => /fail|unauthorized|authentication/i.test(e.message),
    );
    const failed = (await client.listSnapshots()).find((s) => s.name === "private-nocreds")!;
    assert.equal(failed.status, "failed");
    assert.match(String(failed.status_message), /unauthorized|authentication/i);
    const reg = await client.registries.create({
      name: "private",
      url: `http://127.0.0.1:${priv.port}`,
      username: "robot",
      password: "s3cret-registry-pw",
    });
    assert.equal((reg as any).password, undefined, "the password is write-only");
    assert.equal((await client.registries.retrieve("private")).url, `http://127.0.0.1:${priv.port}`);
    assert.equal((await client.registries.list()).registries?.length, 1);
    const stored = await p.ctx.db.selectFrom("sandbox_registries").selectAll().executeTakeFirstOrThrow();
    assert.ok(!JSON.stringify(stored).includes("s3cret-registry-pw"), "sealed at rest");
    assert.ok(!p.logs().includes("s3cret-registry-pw"), "never logged");
    const privSnap = await client.createSnapshot("private-ok", `127.0.0.1:${priv.port}/team/private:2`, 1 << 30, {
      registryId: reg.id,
      timeout: 60,
    });
    assert.equal(privSnap.status, "ready");
    await client.registries.update("private", { password: "wrong" });
    await assert.rejects(
      client.createSnapshot("private-wrong", `127.0.0.1:${priv.port}/team/private:2`, 1 << 30, {
        registryId: reg.id,
        timeout: 60,
      }),
    );
    await client.registries.delete("private");
    assert.equal((await client.registries.list()).registries?.length, 0);

    // A bad reference fails with a reason, never a 500.
    await assert.rejects(
      client.createSnapshot("nothing-there", `127.0.0.1:${pub.port}/absent:1`, 1 << 30, { timeout: 60 }),
    );
    const res = await p.api("/v2/sandboxes/snapshots", {
      method: "POST",
      json: { name: "x", docker_image: "bad ref!", fs_capacity_bytes: 1 << 30 },
    });
    assert.equal(res.status, 422);
  });
});
