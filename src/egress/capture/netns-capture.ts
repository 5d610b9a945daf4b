import { execFile, spawn } from "node:child_process";
import type dgram from "node:dgram";
import type net from "node:net";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { hostVariable } from "../../config/index.ts";

const CHILD = path.join(path.dirname(fileURLToPath(import.meta.url)), "netns-listener-child.mjs");
const SPAWN_TIMEOUT_MS = 15_000;

export class CaptureError extends Error {}

function exec(cmd: string, args: string[]): Promise<{ code: number; stderr: string }> {
  return new Promise((resolve) => {
    execFile(cmd, args, { timeout: 10_000 }, (err, _stdout, stderr) => {
      if (err && (err as NodeJS.ErrnoException).code === "ENOENT")
        resolve({ code: 127, stderr: `${cmd} is not installed` });
      else resolve({ code: err ? 1 : 0, stderr: String(stderr) });
    });
  });
}

const nsArg = (netnsPid: number) => `--net=/proc/${netnsPid}/ns/net`;

/**
 * Routes every address to the namespace's loopback (`local default` in table local, for IPv4 and
 * IPv6), so any TCP connect lands on a listener the proxy owns there and the socket's local
 * address is the original destination — no iptables, no SO_ORIGINAL_DST. Nothing else is added:
 * the namespace still has no route out. Needs `nsenter` (util-linux) and `ip` (iproute2).
 */
export async function routeAllToLoopback(netnsPid: number): Promise<void> {
  const steps: string[][] = [
    ["ip", "link", "set", "lo", "up"],
    ["ip", "route", "replace", "local", "default", "dev", "lo", "table", "local"],
  ];
  for (const step of steps) {
    const r = await exec("nsenter", [nsArg(netnsPid), ...step]);
    if (r.code === 127)
      throw new CaptureError(
        "egress capture needs nsenter (Debian package util-linux) and ip (Debian package iproute2)",
      );
    if (r.code !== 0)
      throw new CaptureError(`cannot configure the sandbox network (${step.join(" ")}): ${r.stderr.trim()}`);
  }
  // IPv6 may be disabled in the namespace; then there is nothing to capture there.
  await exec("nsenter", [
    nsArg(netnsPid),
    "ip",
    "-6",
    "route",
    "replace",
    "local",
    "default",
    "dev",
    "lo",
    "table",
    "local",
  ]);
}

export interface NamespaceListeners {
  tcp: Map<number, net.Server>;
  udp: dgram.Socket[];
  errors: string[];
}

/**
 * Binds listeners inside the namespace through a short-lived child (`nsenter --net=… node child`)
 * that sends each listening socket back over IPC and exits; the listeners then belong to this
 * process. Costs one Node start (~50 ms) per call, and no resident process per sandbox.
 */
export function openNamespaceListeners(
  netnsPid: number,
  spec: { tcp: number[]; dns: boolean },
): Promise<NamespaceListeners> {
  return new Promise((resolve, reject) => {
    const out: NamespaceListeners = { tcp: new Map(), udp: [], errors: [] };
    const child = spawn("nsenter", [nsArg(netnsPid), process.execPath, CHILD, JSON.stringify(spec)], {
      stdio: ["ignore", "ignore", "pipe", "ipc"],
      env: { PATH: hostVariable("PATH") ?? "/usr/bin:/bin" },
    });
    let stderr = "";
    let done = false;
    child.stderr?.on("data", (d) => (stderr += d));
    const timer = setTimeout(
      () => finish(new CaptureError("the in-namespace listener helper did not answer in time")),
      SPAWN_TIMEOUT_MS,
    );
    const finish = (err: Error | null) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      if (err) {
        for (const s of out.tcp.values()) s.close();
        for (const u of out.udp) u.close();
        if (child.exitCode === null) child.kill("SIGKILL");
        reject(err);
      } else resolve(out);
    };
    child.on("message", (msg: { kind: string; port?: number; family?: string; message?: string }, handle: unknown) => {
      if (msg.kind === "tcp" && handle) out.tcp.set(msg.port!, handle as net.Server);
      else if (msg.kind === "udp" && handle) out.udp.push(handle as dgram.Socket);
      else if (msg.kind === "error") out.errors.push(`${msg.family ?? "tcp"} port ${msg.port}: ${msg.message}`);
      else if (msg.kind === "done") finish(null);
    });
    child.on("error", (err) =>
      finish(new CaptureError(`cannot start the in-namespace listener helper: ${err.message}`, { cause: err })),
    );
    // 'exit' can come before the last messages are read from the channel ("done" among them):
    // decide on 'close', which waits for the channel too.
    child.on("close", (code) => {
      if (!done)
        finish(new CaptureError(`the in-namespace listener helper exited (${code}): ${stderr.trim().slice(0, 500)}`));
    });
  });
}

/** Closes listeners nobody adopted (a warm namespace discarded at shutdown or after a failed start). */
export function closeNamespaceListeners(listeners: NamespaceListeners): void {
  for (const s of listeners.tcp.values()) if (s.listening) s.close();
  for (const u of listeners.udp) {
    try {
      u.close();
    } catch {
      /* already closed */
    }
  }
}
