import { execFileSync, spawn, type ChildProcess } from "node:child_process";
import fs from "node:fs";
import net from "node:net";
import path from "node:path";

export const onPath = (cmd: string) => ["/usr/bin", "/usr/sbin", "/bin"].some((d) => fs.existsSync(path.join(d, cmd)));

/** A small root filesystem from host binaries (bash, coreutils, their libraries) in two layers; the second deletes a file. */
export function buildImage(dir: string, extra?: (rootfs: string) => void): string {
  const layout = path.join(dir, "layout");
  const bundle = path.join(dir, "bundle");
  const run = (cmd: string, args: string[]) => execFileSync(cmd, args, { stdio: ["ignore", "ignore", "pipe"] });
  run("umoci", ["init", "--layout", layout]);
  run("umoci", ["new", "--image", `${layout}:t`]);
  run("umoci", ["unpack", "--image", `${layout}:t`, bundle]);
  const root = path.join(bundle, "rootfs");
  const bins = [
    "/usr/bin/bash",
    "/usr/bin/dash",
    "/usr/bin/sleep",
    "/usr/bin/cat",
    "/usr/bin/true",
    "/usr/bin/id",
    "/usr/bin/ls",
    "/usr/bin/env",
    "/usr/bin/test",
    "/usr/bin/echo",
    "/usr/bin/mkdir",
    "/usr/bin/tail",
    "/usr/bin/head",
    "/usr/bin/stat",
    "/usr/bin/mv",
    "/usr/bin/rm",
    "/usr/bin/dirname",
  ];
  const libs = new Set<string>();
  for (const b of bins)
    for (const m of execFileSync("ldd", [b], { encoding: "utf8" }).matchAll(/(\/[^\s]+\.so[^\s]*)/g)) libs.add(m[1]);
  for (const f of [...bins, ...libs]) {
    const real = fs.realpathSync(f);
    const at = path.join(root, f.startsWith("/lib") ? `/usr${f}` : f);
    fs.mkdirSync(path.dirname(at), { recursive: true });
    fs.copyFileSync(real, at);
    fs.chmodSync(at, 0o755);
  }
  for (const l of ["bin", "lib", "lib64"])
    if (!fs.existsSync(path.join(root, l))) fs.symlinkSync(`usr/${l}`, path.join(root, l));
  fs.mkdirSync(path.join(root, "usr/lib64"), { recursive: true });
  fs.symlinkSync("dash", path.join(root, "usr/bin/sh"));
  fs.mkdirSync(path.join(root, "etc"));
  fs.writeFileSync(path.join(root, "etc/layer1.txt"), "from the image\n");
  fs.writeFileSync(path.join(root, "etc/removed.txt"), "deleted by layer 2\n");
  extra?.(root);
  run("umoci", ["repack", "--image", `${layout}:t`, bundle]);
  fs.rmSync(bundle, { recursive: true });
  run("umoci", ["unpack", "--image", `${layout}:t`, bundle]);
  fs.rmSync(path.join(bundle, "rootfs/etc/removed.txt"));
  run("umoci", ["repack", "--image", `${layout}:t`, bundle]);
  fs.rmSync(bundle, { recursive: true });
  return layout;
}

export async function freePort(): Promise<number> {
  const s = net.createServer().listen(0, "127.0.0.1");
  await new Promise((r) => s.once("listening", r));
  const port = (s.address() as net.AddressInfo).port;
  await new Promise((r) => s.close(r));
  return port;
}

/** Debian's docker-registry on loopback, optionally behind htpasswd (bcrypt) credentials. */
export async function startRegistry(
  dir: string,
  auth?: { user: string; password: string },
): Promise<{ port: number; proc: ChildProcess }> {
  const port = await freePort();
  fs.mkdirSync(dir, { recursive: true });
  let authConf = "";
  if (auth) {
    const hash = execFileSync(
      "python3",
      [
        "-W",
        "ignore",
        "-c",
        "import crypt,sys; print(crypt.crypt(sys.argv[1], crypt.mksalt(crypt.METHOD_BLOWFISH)))",
        auth.password,
      ],
      { encoding: "utf8" },
    ).trim();
    fs.writeFileSync(path.join(dir, "htpasswd"), `${auth.user}:${hash}\n`);
    authConf = `auth:\n  htpasswd:\n    realm: test\n    path: ${path.join(dir, "htpasswd")}\n`;
  }
  fs.writeFileSync(
    path.join(dir, "config.yml"),
    `version: 0.1\nlog:\n  level: error\nstorage:\n  filesystem:\n    rootdirectory: ${path.join(dir, "data")}\nhttp:\n  addr: 127.0.0.1:${port}\n${authConf}`,
  );
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
