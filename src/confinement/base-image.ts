import { execFileSync } from "node:child_process";
import crypto from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import { carryAlternatives } from "./alternatives.ts";

/**
 * The read-only userland every sandbox's overlay sits on: a real Debian tree assembled from the
 * host's own installed packages (the dependency closure of the packages below, file lists from
 * dpkg), plus a curated /etc. Built once per package set and cached; shared by all sandboxes.
 * Nothing of the host outside those packages' files (no /usr/local, /opt, /root, host /etc) goes in.
 */
export const BASE_PACKAGES = [
  "bash",
  "dash",
  "coreutils",
  "perl-base",
  "python3",
  "curl",
  "ca-certificates",
  "nodejs",
  "grep",
  "sed",
  "findutils",
  "tar",
  "gzip",
  "xz-utils",
  "bzip2",
  "diffutils",
  "procps",
  "util-linux",
  "hostname",
  "less",
  "ncurses-base",
  "ncurses-bin",
  "libc-bin",
  "git",
  "zstd",
  "unzip",
  "jq",
  "file",
  "mawk",
  "debianutils",
  "sensible-utils",
  "python3-pip",
  "python3-venv",
  "netbase",
  "openssl",
  "patch",
  "make",
  "wget",
  "openssh-client",
];
/** Packages the base cannot do without; the rest are taken when installed. */
export const REQUIRED_BASE_PACKAGES = [
  "bash",
  "coreutils",
  "perl-base",
  "python3",
  "curl",
  "ca-certificates",
  "mawk",
  "debianutils",
];
const BUILD_VERSION = "6";

export const SANDBOX_USER = { uid: 1000, gid: 1000, name: "user", home: "/home/user" };

interface PackageInfo {
  name: string;
  version: string;
  arch: string;
  deps: string[][];
  provides: string[];
}

function installedPackages(): Map<string, PackageInfo> {
  const out = execFileSync(
    "dpkg-query",
    [
      "-W",
      "-f",
      "${Package}\t${Version}\t${Architecture}\t${db:Status-Abbrev}\t${Depends}\t${Pre-Depends}\t${Provides}\n",
    ],
    { encoding: "utf8", maxBuffer: 64 << 20 },
  );
  const byName = new Map<string, PackageInfo>();
  const parseAlternatives = (field: string) =>
    field
      .split(",")
      .map((alt) =>
        alt
          .split("|")
          .map((p) => p.trim().split(/[\s:(]/)[0])
          .filter(Boolean),
      )
      .filter((a) => a.length > 0);
  for (const line of out.split("\n")) {
    const [name, version, arch, status, depends, predepends, provides] = line.split("\t");
    if (!name || !status?.startsWith("ii")) continue;
    byName.set(name, {
      name,
      version,
      arch,
      deps: [...parseAlternatives(depends ?? ""), ...parseAlternatives(predepends ?? "")],
      provides: (provides ?? "")
        .split(",")
        .map((p) => p.trim().split(/[\s(]/)[0])
        .filter(Boolean),
    });
  }
  return byName;
}

/** The installed dependency closure of `roots`; for alternatives the first installed one is taken. */
export function packageClosure(roots: string[]): PackageInfo[] {
  const installed = installedPackages();
  const providers = new Map<string, string>();
  for (const p of installed.values()) for (const v of p.provides) if (!providers.has(v)) providers.set(v, p.name);
  const resolve = (n: string) => (installed.has(n) ? n : providers.get(n));
  const seen = new Map<string, PackageInfo>();
  const queue = roots.map(resolve).filter((n): n is string => !!n);
  while (queue.length) {
    const n = queue.pop()!;
    if (seen.has(n)) continue;
    const info = installed.get(n)!;
    seen.set(n, info);
    for (const alts of info.deps) {
      const hit = alts.map(resolve).find((x) => x !== undefined);
      if (hit && !seen.has(hit)) queue.push(hit);
    }
  }
  return [...seen.values()].sort((a, b) => a.name.localeCompare(b.name));
}

export function missingBasePackages(): string[] {
  const installed = installedPackages();
  return REQUIRED_BASE_PACKAGES.filter((p) => !installed.has(p));
}

function baseId(pkgs: PackageInfo[]): string {
  const h = crypto.createHash("sha256").update(BUILD_VERSION);
  for (const p of pkgs) h.update(`${p.name}=${p.version}\n`);
  // nodejs from other sources than dpkg (a tarball install) is copied by path: include its identity.
  for (const extra of extraFiles()) h.update(`${extra}:${fs.statSync(extra).mtimeMs}\n`);
  return h.digest("hex").slice(0, 16);
}

/** node when it is not a dpkg package (for example installed from a tarball into /usr/bin). */
function extraFiles(): string[] {
  const out: string[] = [];
  for (const f of ["/usr/bin/node"]) {
    try {
      execFileSync("dpkg", ["-S", f], { stdio: "ignore" });
    } catch {
      if (fs.existsSync(f)) out.push(f);
    }
  }
  return out;
}

function packageFiles(pkgs: PackageInfo[]): string[] {
  const names = pkgs.map((p) => (p.arch === "all" || p.arch === "" ? p.name : `${p.name}:${p.arch}`));
  const out = execFileSync("dpkg", ["-L", ...names], { encoding: "utf8", maxBuffer: 256 << 20 });
  const files = new Set<string>();
  const realDirs = new Map<string, string>();
  for (const raw of out.split("\n")) {
    if (
      !raw.startsWith("/") ||
      raw === "/." ||
      raw.startsWith("/etc/") ||
      raw.startsWith("/usr/share/doc/") ||
      raw.startsWith("/usr/share/man/") ||
      raw.startsWith("/usr/share/info/")
    )
      continue;
    // Normalise merged-/usr paths (/bin/bash is /usr/bin/bash here) so the tree has one copy.
    const dir = path.dirname(raw);
    let real = realDirs.get(dir);
    if (real === undefined) {
      try {
        real = fs.realpathSync(dir);
      } catch {
        real = "";
      }
      realDirs.set(dir, real);
    }
    if (!real) continue;
    const p = path.join(real, path.basename(raw));
    try {
      const st = fs.lstatSync(p);
      if (st.isDirectory()) continue; // directories are created by cp --parents
      files.add(p);
    } catch {
      /* listed but not present (diverted or removed) */
    }
  }
  return [...files].sort();
}

function writeEtc(root: string): void {
  const etc = path.join(root, "etc");
  fs.mkdirSync(etc, { recursive: true });
  const u = SANDBOX_USER;
  const files: Record<string, string> = {
    passwd: `root:x:0:0:root:/root:/bin/bash\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n${u.name}:x:${u.uid}:${u.gid}:Sandbox user:${u.home}:/bin/bash\n`,
    group: `root:x:0:\nnogroup:x:65534:\n${u.name}:x:${u.gid}:\n`,
    hosts: "127.0.0.1\tlocalhost sandbox\n::1\tlocalhost ip6-localhost ip6-loopback\n",
    hostname: "sandbox\n",
    "resolv.conf": "nameserver 127.0.0.1\n",
    "nsswitch.conf": "passwd: files\ngroup: files\nhosts: files dns\n",
    "os-release": fs.existsSync("/etc/os-release") ? fs.readFileSync("/etc/os-release", "utf8") : "ID=debian\n",
    profile: 'export PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin\nexport HOME="${HOME:-/home/user}"\n',
    "bash.bashrc": "PS1='\\u@sandbox:\\w\\$ '\n",
    shells: "/bin/sh\n/bin/bash\n/usr/bin/bash\n/bin/dash\n",
  };
  for (const [name, content] of Object.entries(files)) fs.writeFileSync(path.join(etc, name), content, { mode: 0o644 });
  // Public CA certificates (generated by update-ca-certificates on the host; public data only).
  // Not /etc/ssl/private: that holds host keys.
  fs.mkdirSync(path.join(etc, "ssl"), { recursive: true });
  if (fs.existsSync("/etc/ssl/certs")) execFileSync("cp", ["-a", "/etc/ssl/certs", path.join(etc, "ssl") + "/"]);
  if (fs.existsSync("/etc/ssl/openssl.cnf"))
    fs.copyFileSync("/etc/ssl/openssl.cnf", path.join(etc, "ssl", "openssl.cnf"));
  if (fs.existsSync("/etc/ca-certificates")) execFileSync("cp", ["-a", "/etc/ca-certificates", `${etc}/`]);
  if (fs.existsSync("/etc/ca-certificates.conf"))
    fs.copyFileSync("/etc/ca-certificates.conf", path.join(etc, "ca-certificates.conf"));
  // Public defaults that packages ship in /etc and programs read (netbase's services and protocols
  // for getservbyname, libmagic's, inputrc, pip's and Python's site config); never the host's own data.
  for (const f of [
    "services",
    "protocols",
    "rpc",
    "ethertypes",
    "inputrc",
    "magic",
    "magic.mime",
    "mime.types",
    "wgetrc",
  ]) {
    if (fs.existsSync(`/etc/${f}`)) execFileSync("cp", ["-a", `/etc/${f}`, `${etc}/`]);
  }
  for (const d of ["python3", "python3.11", "perl", "bash_completion.d"]) {
    if (fs.existsSync(`/etc/${d}`)) execFileSync("cp", ["-a", `/etc/${d}`, `${etc}/`]);
  }
  fs.writeFileSync(path.join(etc, "ld.so.conf"), "include /etc/ld.so.conf.d/*.conf\n");
  if (fs.existsSync("/etc/ld.so.conf.d")) execFileSync("cp", ["-a", "/etc/ld.so.conf.d", `${etc}/`]);
  if (fs.existsSync("/etc/ld.so.cache")) fs.copyFileSync("/etc/ld.so.cache", path.join(etc, "ld.so.cache"));
}

/**
 * Returns the directory of the base image for the current package set, building it first if needed.
 * Concurrent builders are safe: each builds into its own temporary folder and renames it into place.
 */
export function ensureBaseImage(
  cacheDir: string,
  log?: (msg: string, extra?: object) => void,
): { dir: string; id: string; built: boolean; ms: number } {
  const started = performance.now();
  const pkgs = packageClosure(BASE_PACKAGES);
  const id = baseId(pkgs);
  const dir = path.join(cacheDir, `base-${id}`);
  if (fs.existsSync(path.join(dir, ".wharf-base-complete")))
    return { dir, id, built: false, ms: performance.now() - started };
  fs.mkdirSync(cacheDir, { recursive: true, mode: 0o755 });
  const tmp = fs.mkdtempSync(path.join(cacheDir, `.build-${id}-`));
  fs.chmodSync(tmp, 0o755);
  log?.("building sandbox base image", { id, packages: pkgs.length });
  try {
    for (const d of ["usr/bin", "usr/sbin", "usr/lib", "usr/lib64"])
      fs.mkdirSync(path.join(tmp, d), { recursive: true });
    for (const l of ["bin", "sbin", "lib", "lib64"]) fs.symlinkSync(`usr/${l}`, path.join(tmp, l));
    const files = [...packageFiles(pkgs), ...extraFiles()];
    const list = path.join(cacheDir, `.list-${id}-${process.pid}`);
    fs.writeFileSync(list, files.map((f) => f.slice(1)).join("\0"));
    try {
      // Hard links when the cache is on the same filesystem as /usr (instant, no extra disk); else a copy.
      const sameFs = fs.statSync("/usr").dev === fs.statSync(cacheDir).dev;
      execFileSync(
        "sh",
        ["-c", `cd / && xargs -0 cp -a --parents ${sameFs ? "-l" : ""} -t "$1" < "$2"`, "sh", tmp, list],
        { stdio: ["ignore", "ignore", "pipe"] },
      );
    } finally {
      fs.rmSync(list, { force: true });
    }
    writeEtc(tmp);
    const alternatives = carryAlternatives(tmp);
    log?.("sandbox base image: alternatives carried over", { count: alternatives.length });
    for (const d of [
      "home/user",
      "root",
      "tmp",
      "var/tmp",
      "run",
      "proc",
      "dev",
      "sys",
      "mnt",
      "opt",
      "srv",
      "usr/local/bin",
      "etc/wharf",
      "var/lib",
      "var/cache",
      "var/log",
    ])
      fs.mkdirSync(path.join(tmp, d), { recursive: true });
    fs.chmodSync(path.join(tmp, "tmp"), 0o1777);
    fs.chmodSync(path.join(tmp, "var/tmp"), 0o1777);
    fs.writeFileSync(
      path.join(tmp, ".wharf-base-complete"),
      JSON.stringify({ id, packages: pkgs.map((p) => `${p.name}=${p.version}`) }, null, 1),
    );
    try {
      fs.renameSync(tmp, dir);
    } catch (err) {
      // Another builder won the race: use theirs.
      if (!fs.existsSync(path.join(dir, ".wharf-base-complete"))) throw err;
      fs.rmSync(tmp, { recursive: true, force: true });
    }
  } catch (err) {
    fs.rmSync(tmp, { recursive: true, force: true });
    throw err;
  }
  const ms = performance.now() - started;
  log?.("sandbox base image ready", { id, ms: Math.round(ms) });
  return { dir, id, built: true, ms };
}
