import fs from "node:fs";
import path from "node:path";
import { buildSeccompFilter, checkHost, ensureBaseImage, HostNotReady } from "../../../confinement/index.ts";
import { releaseLeftImageMounts } from "./filesystem.ts";
import { DISK_POINT, MOUNT_POINT, type LocalHost } from "./host.ts";

/** Checks the host and sets up what every sandbox shares: folders, the base image, the seccomp program. */
export function prepareHost(host: LocalHost): void {
  checkHost();
  fs.mkdirSync(path.join(host.opts.stateDir, "boxes"), { recursive: true, mode: 0o700 });
  releaseLeftImageMounts(host);
  fs.mkdirSync(MOUNT_POINT, { recursive: true, mode: 0o755 });
  fs.mkdirSync(DISK_POINT, { recursive: true, mode: 0o755 });
  const base = ensureBaseImage(host.opts.baseCacheDir, host.opts.log);
  host.baseDir = base.dir;
  const filter = buildSeccompFilter();
  host.bpfFile = path.join(host.opts.stateDir, "seccomp.bpf");
  if (!host.sys) throw new HostNotReady(`the local sandbox driver supports x86_64 and arm64, not ${process.arch}`);
  host.sysArg = Object.entries(host.sys)
    .map(([k, v]) => `${k}=${v}`)
    .join(",");
  if (filter) {
    fs.writeFileSync(host.bpfFile, filter, { mode: 0o644 });
    host.bpfHex = filter.toString("hex");
  } else {
    // bwrap needs a program; an empty one is refused, so fall back to "allow all".
    fs.writeFileSync(host.bpfFile, Buffer.from([0x06, 0, 0, 0, 0x00, 0x00, 0xff, 0x7f]));
    host.opts.log?.("seccomp filter unavailable on this architecture", { arch: process.arch });
  }
}
