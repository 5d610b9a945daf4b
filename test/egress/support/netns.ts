import { execFile, spawn, type ChildProcess } from "node:child_process";
import crypto from "node:crypto";
import fs from "node:fs";
import type { TestContext } from "node:test";
import { isRoot } from "../../support/requirements.ts";

/** Can this machine create network namespaces (root, iproute2, util-linux)? */
export async function netnsAvailable(): Promise<boolean> {
  if (!isRoot()) return false;
  const name = `wharf-probe-${crypto.randomBytes(3).toString("hex")}`;
  const ok = await sh("ip", ["netns", "add", name]);
  if (ok.code !== 0) return false;
  await sh("ip", ["netns", "del", name]);
  return (await sh("nsenter", ["--version"])).code === 0;
}

export function sh(
  cmd: string,
  args: string[],
  opts: { env?: Record<string, string>; timeoutMs?: number; input?: string } = {},
): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = execFile(
      cmd,
      args,
      {
        env: { PATH: process.env.PATH ?? "/usr/sbin:/usr/bin:/sbin:/bin", HOME: "/root", ...opts.env },
        timeout: opts.timeoutMs ?? 20_000,
        maxBuffer: 8 << 20,
      },
      (err, stdout, stderr) => {
        resolve({ code: err ? (typeof (err as any).code === "number" ? (err as any).code : 1) : 0, stdout, stderr });
      },
    );
    if (opts.input !== undefined) child.stdin?.end(opts.input);
  });
}

export interface TestNetns {
  name: string;
  /** A process inside the namespace (what the sandbox driver hands to attachEgress). */
  pid: number;
  /** Runs a command inside the namespace with the given environment only. */
  exec(
    argv: string[],
    env?: Record<string, string>,
    timeoutMs?: number,
  ): Promise<{ code: number; stdout: string; stderr: string }>;
  /** Sets the namespace's /etc/resolv.conf (ip netns exec bind-mounts /etc/netns/<name>/*). */
  setResolvConf(text: string): void;
}

/** A bare network namespace with loopback only, as the sandbox driver creates, removed at the end. */
export async function createNetns(t: TestContext): Promise<TestNetns> {
  const name = `wharf-eg-${crypto.randomBytes(4).toString("hex")}`;
  const add = await sh("ip", ["netns", "add", name]);
  if (add.code !== 0) throw new Error(`ip netns add: ${add.stderr}`);
  const etc = `/etc/netns/${name}`;
  fs.mkdirSync(etc, { recursive: true });
  fs.writeFileSync(`${etc}/resolv.conf`, "nameserver 127.0.0.1\n");
  const holder: ChildProcess = spawn("ip", ["netns", "exec", name, "sleep", "3600"], { stdio: "ignore" });
  await new Promise((r) => setTimeout(r, 100));
  t.after(async () => {
    holder.kill("SIGKILL");
    await sh("ip", ["netns", "del", name]);
    fs.rmSync(etc, { recursive: true, force: true });
  });
  return {
    name,
    pid: holder.pid!,
    exec: (argv, env = {}, timeoutMs) => sh("ip", ["netns", "exec", name, ...argv], { env, timeoutMs }),
    setResolvConf: (text) => fs.writeFileSync(`${etc}/resolv.conf`, text),
  };
}
