import crypto from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import type { SecretBox } from "../../crypto/secret-box.ts";
import { newId } from "../../store/ids.ts";
import type { DeploymentsLayout } from "../layout.ts";
import { admitUpload, type UploadLimits } from "./upload-quota.ts";

const UPLOAD_TTL_MS = 15 * 60_000;
const OBJECT_PATH = /^uploads\/([0-9a-f-]{36})\/([0-9a-f-]{36})\.tar\.gz$/;

interface UploadClaim {
  /** workspace */
  w: string;
  /** object path */
  o: string;
  /** expiry, epoch ms */
  e: number;
}

function sign(box: SecretBox, payload: string): string {
  return crypto.createHmac("sha256", box.deriveKey("deployment-uploads")).update(payload).digest("base64url");
}

/**
 * A signed, expiring URL to PUT one source tarball to (the way the real CLI uploads to a signed
 * bucket URL), and the `object_path` to name it by in `source_revision_config.source_tarball_path`.
 */
export function createUploadUrl(
  box: SecretBox,
  baseUrl: string,
  workspaceId: string,
): { upload_url: string; object_path: string; expires_at: string } {
  const objectPath = `uploads/${workspaceId}/${newId()}.tar.gz`;
  const claim: UploadClaim = { w: workspaceId, o: objectPath, e: Date.now() + UPLOAD_TTL_MS };
  const payload = Buffer.from(JSON.stringify(claim)).toString("base64url");
  return {
    upload_url: `${baseUrl}/deployments-uploads/${payload}.${sign(box, payload)}`,
    object_path: objectPath,
    expires_at: new Date(claim.e).toISOString(),
  };
}

export function verifyUploadToken(box: SecretBox, token: string): UploadClaim | null {
  const [payload, mac] = token.split(".");
  if (!payload || !mac) return null;
  const expected = Buffer.from(sign(box, payload));
  const given = Buffer.from(mac);
  if (expected.length !== given.length || !crypto.timingSafeEqual(expected, given)) return null;
  try {
    const claim = JSON.parse(Buffer.from(payload, "base64url").toString()) as UploadClaim;
    if (typeof claim.e !== "number" || claim.e < Date.now() || !OBJECT_PATH.test(claim.o)) return null;
    return claim;
  } catch {
    return null;
  }
}

/** Streams an upload body to its file (written aside, then renamed: a reader never sees half a file). */
export class UploadTooLarge extends Error {}

export async function storeUpload(
  layout: DeploymentsLayout,
  claim: UploadClaim,
  body: ReadableStream<Uint8Array>,
  maxBytes: number,
  limits: UploadLimits,
): Promise<number> {
  const file = layout.uploadFile(claim.o);
  fs.mkdirSync(path.dirname(file), { recursive: true, mode: 0o700 });
  const quota = admitUpload(path.dirname(file), limits);
  const tmp = `${file}.${process.pid}.part`;
  let bytes = 0;
  const counted = Readable.fromWeb(body as import("node:stream/web").ReadableStream).on("data", (c: Buffer) => {
    bytes += c.length;
    if (bytes > maxBytes)
      counted.destroy(new UploadTooLarge(`the upload is larger than ${maxBytes} bytes (WHARF_UPLOAD_LIMIT_BYTES)`));
    try {
      quota.add(c.length);
    } catch (err) {
      counted.destroy(err as Error);
    }
  });
  const out = fs.createWriteStream(tmp, { mode: 0o600 });
  try {
    await pipeline(counted, out);
    fs.renameSync(tmp, file);
  } finally {
    quota.release();
    // A refused upload can fail before the file is even open: the stream opens (creating the file)
    // and closes after pipeline has already failed, so the partial file is removed only once closed.
    if (!out.closed) await new Promise<void>((resolve) => out.once("close", () => resolve()));
    fs.rmSync(tmp, { force: true });
  }
  return bytes;
}

/** Whether `objectPath` names an uploaded tarball of this workspace. */
export function uploadExists(layout: DeploymentsLayout, workspaceId: string, objectPath: string): boolean {
  const m = OBJECT_PATH.exec(objectPath);
  return !!m && m[1] === workspaceId && fs.existsSync(layout.uploadFile(objectPath));
}
