import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { test } from "node:test";
import { startDeploymentsPlatform } from "./support.ts";

const create = (
  p: { api: (path: string, init?: RequestInit & { json?: unknown }) => Promise<Response> },
  name: string,
  revisionConfig: Record<string, unknown> = {},
) =>
  p.api("/v2/deployments", {
    method: "POST",
    json: { name, source: "internal_source", source_config: {}, source_revision_config: revisionConfig, secrets: [] },
  });

test("a workspace past its deployment quota gets 429, and room again once one is deleted", async (t) => {
  const p = await startDeploymentsPlatform(t, { env: { WHARF_DEPLOYMENT_WORKSPACE_MAX: "2" } });
  if (!p) return;
  const first = await create(p, "one");
  assert.equal(first.status, 201);
  assert.equal((await create(p, "two")).status, 201);
  const res = await create(p, "three");
  assert.equal(res.status, 429);
  assert.match((await res.json()).detail, /^Deployment quota reached: this workspace may have 2 deployments/);
  assert.equal((await p.api(`/v2/deployments/${(await first.json()).id}`, { method: "DELETE" })).status, 204);
  assert.equal((await create(p, "three")).status, 201);
});

test("uploads: a workspace's count and bytes are bounded (429, nothing left behind); unused uploads expire, used ones stay", async (t) => {
  const p = await startDeploymentsPlatform(t, {
    env: {
      WHARF_DEPLOYMENT_UPLOADS_MAX: "3",
      WHARF_DEPLOYMENT_UPLOADS_MAX_BYTES: String(100 * 1024),
      WHARF_DEPLOYMENT_UPLOAD_TTL_SECONDS: "2",
    },
  });
  if (!p) return;
  const put = async (bytes: number) => {
    const { upload_url, object_path } = await (await p.api("/v2/deployments/upload-url", { method: "POST" })).json();
    return {
      res: await fetch(upload_url, { method: "PUT", body: new Uint8Array(bytes) }),
      object_path: object_path as string,
    };
  };
  const a = await put(40 * 1024);
  assert.equal(a.res.status, 200);
  // Past the workspace's bytes: refused while streaming, its partial file removed.
  const big = await put(70 * 1024);
  assert.equal(big.res.status, 429);
  assert.match((await big.res.json()).detail, /^Upload quota exceeded: .*WHARF_DEPLOYMENT_UPLOADS_MAX_BYTES/);
  // Concurrent uploads share the room: of two 40 KiB uploads with 60 KiB left, at most one gets through.
  const pair = await Promise.all([put(40 * 1024), put(40 * 1024)]);
  const statuses = pair.map((u) => u.res.status);
  assert.ok(statuses.includes(429) && statuses.every((s) => s === 200 || s === 429), String(statuses));
  const folder = path.dirname(path.join(p.home, "deployments", a.object_path));
  const tarballs = () => fs.readdirSync(folder).filter((f) => f.endsWith(".tar.gz"));
  let b = pair.find((u) => u.res.status === 200) ?? (await put(1024));
  while (tarballs().length < 3) b = await put(1024);
  assert.equal(b.res.status, 200);
  // Past the count.
  const many = await put(10);
  assert.equal(many.res.status, 429);
  assert.match((await many.res.json()).detail, /WHARF_DEPLOYMENT_UPLOADS_MAX\)/);
  assert.deepEqual(
    fs.readdirSync(folder).filter((f) => !f.endsWith(".tar.gz")),
    [],
    "no partial files left",
  );
  assert.equal(fs.readdirSync(folder).length, 3);

  // A deployment names `a` (as a create with it would); `b` and the other are unused and expire.
  const d = await (await create(p, "keeper")).json();
  await p.ctx.db
    .updateTable("deployments")
    .set({ source_revision_config: JSON.stringify({ source_tarball_path: a.object_path }) })
    .where("id", "=", d.id)
    .execute();
  const deadline = Date.now() + 15_000;
  while (fs.readdirSync(folder).length > 1 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 200));
  assert.deepEqual(fs.readdirSync(folder), [path.basename(a.object_path)]);
  const res = await create(p, "late", { source_tarball_path: b.object_path });
  assert.equal(res.status, 422, "an expired upload cannot be deployed");
  // With room again, uploads work.
  assert.equal((await put(1024)).res.status, 200);
});
