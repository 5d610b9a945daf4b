import { execFileSync } from "node:child_process";
import fs from "node:fs";
import { missingBasePackages } from "./base-image.ts";
import { hostVariable } from "../config/index.ts";

/** Commands the local driver runs, and the Debian package each comes from. */
export const HOST_COMMANDS: Array<[command: string, pkg: string]> = [
  ["bwrap", "bubblewrap"],
  ["nsenter", "util-linux"],
  ["unshare", "util-linux"],
  ["setpriv", "util-linux"],
  ["mount", "mount"],
  ["ip", "iproute2"],
  ["perl", "perl-base"],
  ["tar", "tar"],
  ["zstd", "zstd"],
  ["dpkg-query", "dpkg"],
];

function onPath(cmd: string): boolean {
  return (hostVariable("PATH") ?? "/usr/sbin:/usr/bin:/sbin:/bin").split(":").some((d) => {
    try {
      fs.accessSync(`${d}/${cmd}`, fs.constants.X_OK);
      return true;
    } catch {
      return false;
    }
  });
}

export class HostNotReady extends Error {}

/**
 * Throws HostNotReady naming the exact Debian packages to install (or the fix) when this host
 * cannot run sandboxes; `scripts/setup-host.sh` installs all of them.
 */
export function checkHost(): void {
  if (process.platform !== "linux")
    throw new HostNotReady("the local sandbox driver needs Linux (namespaces, overlayfs, cgroups)");
  if (process.getuid?.() !== 0)
    throw new HostNotReady(
      "the local sandbox driver runs as root (it mounts overlays, creates network namespaces and cgroups); run Wharf as root or use a remote driver",
    );
  const missing = new Set<string>();
  for (const [cmd, pkg] of HOST_COMMANDS) if (!onPath(cmd)) missing.add(pkg);
  try {
    for (const p of missingBasePackages()) missing.add(p);
  } catch {
    missing.add("dpkg");
  }
  if (missing.size) {
    throw new HostNotReady(
      `missing Debian packages for sandboxes: ${[...missing].join(" ")} — run \`sudo scripts/setup-host.sh\` (or apt-get install -y ${[...missing].join(" ")})`,
    );
  }
  const fsList = fs.readFileSync("/proc/filesystems", "utf8");
  if (!/\toverlay$/m.test(fsList)) {
    try {
      execFileSync("modprobe", ["overlay"], { stdio: "ignore" });
    } catch {
      throw new HostNotReady("the kernel has no overlay filesystem (modprobe overlay failed)");
    }
  }
}
