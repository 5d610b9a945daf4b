import assert from "node:assert/strict";
import crypto from "node:crypto";
import fs from "node:fs";
import http from "node:http";
import type { AddressInfo } from "node:net";
import os from "node:os";
import path from "node:path";
import { test } from "node:test";
import { outboundPolicy } from "../../src/egress/index.ts";
import { pullBound, pullImage } from "../../src/sandboxes/driver/oci-image.ts";
import { isRoot, requireCapability } from "../support/requirements.ts";
import { onPath } from "./registry-support.ts";

const MiB = 1024 ** 2;

/**
 * A tiny OCI registry on loopback whose one image has a single layer far larger than the
 * snapshot's capacity allows (the registry is hostile: what it serves would fill the platform's
 * disk before the unpacked size is ever checked). It counts the bytes it manages to send.
 */
async function hostileRegistry(
  layerBytes: number,
): Promise<{ port: number; sent: () => number; close: () => Promise<void> }> {
  const chunk = crypto.randomBytes(MiB);
  const layerHash = crypto.createHash("sha256");
  for (let i = 0; i < layerBytes / MiB; i++) layerHash.update(chunk);
  const layerDigest = `sha256:${layerHash.digest("hex")}`;
  const config = Buffer.from(
    JSON.stringify({
      architecture: process.arch === "arm64" ? "arm64" : "amd64",
      os: "linux",
      rootfs: { type: "layers", diff_ids: [layerDigest] },
      config: {},
    }),
  );
  const configDigest = `sha256:${crypto.createHash("sha256").update(config).digest("hex")}`;
  const manifest = Buffer.from(
    JSON.stringify({
      schemaVersion: 2,
      mediaType: "application/vnd.oci.image.manifest.v1+json",
      config: { mediaType: "application/vnd.oci.image.config.v1+json", digest: configDigest, size: config.length },
      layers: [{ mediaType: "application/vnd.oci.image.layer.v1.tar", digest: layerDigest, size: layerBytes }],
    }),
  );
  const manifestDigest = `sha256:${crypto.createHash("sha256").update(manifest).digest("hex")}`;
  let sent = 0;
  const server = http.createServer((req, res) => {
    const url = req.url ?? "";
    const body = (type: string, data: Buffer, digest: string) => {
      res.writeHead(200, { "content-type": type, "content-length": data.length, "docker-content-digest": digest });
      if (req.method === "HEAD") return void res.end();
      sent += data.length;
      res.end(data);
    };
    if (url === "/v2/" || url === "/v2")
      return void res.writeHead(200, { "content-type": "application/json" }).end("{}");
    if (/^\/v2\/big\/manifests\/(1|sha256:[0-9a-f]+)$/.test(url))
      return body("application/vnd.oci.image.manifest.v1+json", manifest, manifestDigest);
    if (url === `/v2/big/blobs/${configDigest}`) return body("application/octet-stream", config, configDigest);
    if (url === `/v2/big/blobs/${layerDigest}`) {
      res.writeHead(200, {
        "content-type": "application/octet-stream",
        "content-length": layerBytes,
        "docker-content-digest": layerDigest,
      });
      if (req.method === "HEAD") return void res.end();
      let i = 0;
      const more = () => {
        while (i < layerBytes / MiB) {
          i++;
          sent += chunk.length;
          if (!res.write(chunk)) return void res.once("drain", more);
        }
        res.end();
      };
      res.on("error", () => {});
      return more();
    }
    res.writeHead(404, { "content-type": "application/json" }).end(JSON.stringify({ errors: [{ code: "NOT_FOUND" }] }));
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return {
    port: (server.address() as AddressInfo).port,
    sent: () => sent,
    close: () => new Promise<void>((r) => server.close(() => r())).then(() => server.closeAllConnections()),
  };
}

test("an image whose compressed download passes what the snapshot's capacity allows is cut off while downloading", async (t) => {
  if (!requireCapability(t, isRoot(), "image pulls run in a network namespace of their own (root)")) return;
  if (
    !requireCapability(
      t,
      onPath("skopeo") && onPath("umoci"),
      "snapshots from images need skopeo and umoci (scripts/setup-host.sh)",
    )
  )
    return;
  const capacity = 16 * MiB;
  const layer = 256 * MiB;
  const registry = await hostileRegistry(layer);
  t.after(() => registry.close());
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "wharf-pull-bound-"));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  // The operator allows this loopback registry: only the size is at stake here.
  const policy = outboundPolicy({
    WHARF_EGRESS_HOSTS: "",
    WHARF_EGRESS_ALLOW_INTERNAL: ["127.0.0.1/32"],
    WHARF_EGRESS_SYSTEM_DNS: false,
  });
  const started = performance.now();
  await assert.rejects(
    pullImage({
      image: `127.0.0.1:${registry.port}/big:1`,
      dest: path.join(dir, "img"),
      insecure: true,
      policy,
      capacityBytes: capacity,
    }),
    /download passed \d+ bytes and was cut/,
  );
  const bound = pullBound(capacity);
  // What left the registry: the bound, plus what was in flight in socket buffers when it was cut.
  assert.ok(
    registry.sent() < bound + 16 * MiB,
    `the registry sent ${Math.round(registry.sent() / MiB)} MiB for a bound of ${Math.round(bound / MiB)} MiB`,
  );
  console.log(
    `cut after ${Math.round(registry.sent() / MiB)} MiB of a ${layer / MiB} MiB layer (bound ${Math.round(bound / MiB)} MiB) in ${Math.round(performance.now() - started)} ms`,
  );
  // Nothing of the pull is left behind.
  assert.deepEqual(fs.readdirSync(dir), []);
});
