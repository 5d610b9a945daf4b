import { execFile } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { promisify } from "node:util";
import { OutboundRefused, OutboundTooLarge, runWithOutboundPolicy, type OutboundPolicy } from "../../egress/index.ts";
import { SANDBOX_USER } from "../../confinement/index.ts";
import { checkUnpackedSize } from "./layer-bound.ts";
import { hostVariable } from "../../config/index.ts";

const execFileP = promisify(execFile);

/**
 * Turns an OCI/Docker image into a root filesystem a sandbox can sit on, with the tools made for
 * the job: `skopeo` pulls it (manifest lists resolved to this host's platform, every blob's digest
 * checked) into an OCI layout, `umoci` unpacks the layers in order (whiteouts and opaque
 * directories applied, ownership kept). Then the few things every sandbox needs are added:
 * the sandbox user, its home, /tmp, the resolver pointing at the egress proxy's DNS.
 */
export interface PullRequest {
  /** `python:3.12-slim`, `registry.example.com:5000/team/app@sha256:…` */
  image: string;
  /** Final directory: `<dest>/rootfs` is the filesystem. Built beside it and renamed in. */
  dest: string;
  credentials?: { username: string; password: string; host: string } | null;
  /** Plain HTTP or a self-signed registry (loopback registries, `http://` registry URLs). */
  insecure?: boolean;
  timeoutMs?: number;
  /** Where skopeo may connect (the egress address policy). */
  policy: OutboundPolicy;
  /** The snapshot's capacity: an image that would unpack to more is refused before unpacking. */
  capacityBytes: number;
}

/** `docker://` reference for skopeo; Docker Hub short names get `docker.io/library/`. */
export function dockerReference(image: string): string {
  const first = image.split("/")[0];
  const hasRegistry = image.includes("/") && (first.includes(".") || first.includes(":") || first === "localhost");
  if (hasRegistry) return `docker://${image}`;
  return `docker://docker.io/${image.includes("/") ? image : `library/${image}`}`;
}

/** The registry host an image reference names (`docker.io` when it names none). */
export function imageHost(image: string): string {
  const ref = dockerReference(image).slice("docker://".length);
  return ref.split("/")[0];
}

export function isLoopbackHost(host: string): boolean {
  const h = host.replace(/:\d+$/, "").replace(/^\[|\]$/g, "");
  return h === "localhost" || h === "::1" || /^127\./.test(h);
}

/** Destinations skopeo dials without its proxy (Go never proxies loopback): tunnelled to it instead. */
export function directDestinations(host: string): string[] {
  if (!isLoopbackHost(host)) return [];
  return /:\d+$/.test(host) ? [host] : [`${host}:443`, `${host}:80`];
}

function short(err: unknown): string {
  const e = err as { stderr?: string; message?: string };
  return (e.stderr || e.message || String(err)).trim().split("\n").slice(-3).join(" ").slice(0, 500);
}

/** What a pull may download beyond the snapshot's capacity: manifests, configs, TLS and HTTP framing. */
export const PULL_OVERHEAD_BYTES = 16 * 1024 ** 2;

/**
 * The most a pull may download: what its layers unpack to must fit the snapshot's capacity (checked
 * again, exactly, before unpacking), and compressed they are no larger than that, but for gzip's
 * framing of data that does not compress (well under 1%).
 */
export function pullBound(capacityBytes: number): number {
  return capacityBytes + Math.ceil(capacityBytes / 100) + PULL_OVERHEAD_BYTES;
}

/** Pulls and unpacks; returns the manifest digest. Throws with skopeo's or umoci's own message. */
export async function pullImage(req: PullRequest): Promise<{ digest: string; rootfs: string }> {
  const work = `${req.dest}.build-${process.pid}-${Date.now()}`;
  fs.rmSync(work, { recursive: true, force: true });
  fs.mkdirSync(work, { recursive: true, mode: 0o700 });
  const timeout = req.timeoutMs ?? 15 * 60_000;
  const tls = req.insecure ? ["--src-tls-verify=false"] : [];
  const auth: string[] = [];
  try {
    if (req.credentials) {
      // An auth file (0600, deleted after) rather than --src-creds: no password in a process list.
      const authFile = path.join(work, "auth.json");
      const token = Buffer.from(`${req.credentials.username}:${req.credentials.password}`).toString("base64");
      fs.writeFileSync(authFile, JSON.stringify({ auths: { [req.credentials.host]: { auth: token } } }), {
        mode: 0o600,
      });
      auth.push("--authfile", authFile);
    }
    const ref = dockerReference(req.image);
    const digestFile = path.join(work, "digest");
    // No default credentials of the platform's own user (~/.docker, $XDG_RUNTIME_DIR) for a tenant's pull.
    const skopeo = (args: string[], timeoutMs: number, maxBytes?: number) =>
      runWithOutboundPolicy({
        policy: req.policy,
        command: "skopeo",
        args,
        env: { PATH: hostVariable("PATH") ?? "/usr/bin:/bin", HOME: work, XDG_RUNTIME_DIR: work },
        direct: directDestinations(imageHost(req.image)),
        timeoutMs,
        maxBytes,
      });
    try {
      await skopeo(
        ["copy", "--quiet", ...auth, ...tls, "--digestfile", digestFile, ref, `oci:${path.join(work, "layout")}:image`],
        timeout,
        pullBound(req.capacityBytes),
      );
    } catch (err) {
      if (err instanceof OutboundRefused) throw new Error(`pulling ${req.image} was ${err.message}`, { cause: err });
      if (err instanceof OutboundTooLarge)
        throw new Error(
          `pulling ${req.image} was stopped: ${err.message} (more than layers that fit the snapshot's fs_capacity_bytes can take)`,
          { cause: err },
        );
      throw new Error(`pulling ${req.image} failed: ${short(err)}`, { cause: err });
    }
    let digest = "";
    try {
      digest = (await skopeo(["inspect", ...auth, ...tls, "--format", "{{.Digest}}", ref], 60_000)).stdout.trim();
    } catch {
      digest = fs.readFileSync(digestFile, "utf8").trim(); // the registry answered the pull but not inspect: the pulled manifest's digest
    }
    await checkUnpackedSize(path.join(work, "layout"), "image", req.capacityBytes);
    try {
      await execFileP("umoci", ["unpack", "--image", `${path.join(work, "layout")}:image`, path.join(work, "bundle")], {
        timeout,
        maxBuffer: 4 << 20,
      });
    } catch (err) {
      throw new Error(`unpacking ${req.image} failed: ${short(err)}`, { cause: err });
    }
    const rootfs = path.join(work, "bundle", "rootfs");
    fitForSandbox(rootfs);
    // Only the filesystem is kept: the layout's blobs are not needed once unpacked.
    fs.rmSync(path.join(work, "layout"), { recursive: true, force: true });
    fs.rmSync(path.join(work, "auth.json"), { force: true });
    fs.rmSync(req.dest, { recursive: true, force: true });
    fs.renameSync(work, req.dest);
    return { digest, rootfs: path.join(req.dest, "bundle", "rootfs") };
  } catch (err) {
    fs.rmSync(work, { recursive: true, force: true });
    throw err;
  }
}

/** The sandbox user, its home, /tmp, mount points, and DNS through the egress proxy. */
function fitForSandbox(rootfs: string): void {
  const u = SANDBOX_USER;
  const etc = path.join(rootfs, "etc");
  // Symlinks in an image are the image's (an absolute one points into the host's tree here):
  // never write through one, at any depth.
  const safe = (p: string) => {
    let cur = rootfs;
    for (const part of path.relative(rootfs, p).split(path.sep)) {
      cur = path.join(cur, part);
      const st = fs.lstatSync(cur, { throwIfNoEntry: false });
      if (!st) return true;
      if (st.isSymbolicLink()) return false;
    }
    return true;
  };
  if (safe(etc)) fs.mkdirSync(etc, { recursive: true, mode: 0o755 });
  const appendLine = (file: string, match: RegExp, line: string) => {
    const p = path.join(etc, file);
    if (!safe(p)) return;
    const text = fs.existsSync(p) ? fs.readFileSync(p, "utf8") : "";
    if (!match.test(text))
      fs.writeFileSync(p, `${text}${text && !text.endsWith("\n") ? "\n" : ""}${line}\n`, { mode: 0o644 });
  };
  appendLine(
    "passwd",
    new RegExp(`^[^:]*:[^:]*:${u.uid}:`, "m"),
    `${u.name}:x:${u.uid}:${u.gid}:Sandbox user:${u.home}:/bin/sh`,
  );
  appendLine("group", new RegExp(`^[^:]*:[^:]*:${u.gid}:`, "m"), `${u.name}:x:${u.gid}:`);
  for (const [file, content] of [
    ["resolv.conf", "nameserver 127.0.0.1\n"],
    ["hosts", "127.0.0.1\tlocalhost sandbox\n::1\tlocalhost ip6-localhost ip6-loopback\n"],
    ["hostname", "sandbox\n"],
  ]) {
    const p = path.join(etc, file);
    if (safe(p)) {
      fs.rmSync(p, { force: true });
      fs.writeFileSync(p, content, { mode: 0o644 });
    }
  }
  for (const d of ["tmp", "var/tmp", "proc", "dev", "sys", "run", u.home.slice(1)]) {
    const p = path.join(rootfs, d);
    if (safe(p) && !fs.existsSync(p)) fs.mkdirSync(p, { recursive: true, mode: 0o755 });
  }
  for (const d of ["tmp", "var/tmp"]) if (safe(path.join(rootfs, d))) fs.chmodSync(path.join(rootfs, d), 0o1777);
}
