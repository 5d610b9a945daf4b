import { spawn } from "node:child_process";
import type dgram from "node:dgram";
import type net from "node:net";
import type { CapturedNetwork } from "./driver.ts";
import { perlArgs, type LauncherSyscalls } from "../../confinement/index.ts";

/**
 * CONNECT (perl/connect.pl): opens a TCP connection to 127.0.0.1:PORT (then [::1]:PORT) *inside* a
 * sandbox's network namespace and hands the connected socket to the platform over Node's IPC
 * channel, so the platform gets an ordinary net.Socket. Nothing runs inside the sandbox; the
 * process lives a few milliseconds. It refuses unless PID still has the start time START (a
 * recycled pid must never put the connection into another namespace).
 */

export class PortRefused extends Error {}

/** A socket connected to `port` on the loopback of the network namespace of `pid` (started at `start`). */
export function connectInNamespace(
  sys: LauncherSyscalls,
  pid: number,
  start: number,
  port: number,
  timeoutMs = 5000,
): Promise<net.Socket> {
  const sysArg = Object.entries(sys)
    .map(([k, v]) => `${k}=${v}`)
    .join(",");
  return new Promise((resolve, reject) => {
    const child = spawn("/usr/bin/perl", [...perlArgs("connect"), sysArg, String(pid), String(start), String(port)], {
      stdio: ["ignore", "ignore", "pipe", "ipc"],
      env: {},
    });
    let stderr = "";
    let got: net.Socket | null = null;
    const timer = setTimeout(() => child.kill("SIGKILL"), timeoutMs);
    child.stderr!.on("data", (d: Buffer) => (stderr += d.toString()));
    child.on("message", (_msg, handle) => {
      if (handle) got = handle as net.Socket;
    });
    child.on("error", (err) => {
      clearTimeout(timer);
      reject(err);
    });
    // 'exit' can come before the socket's message is read from the channel: decide on 'close'.
    child.on("close", (code) => {
      clearTimeout(timer);
      if (got) return resolve(got);
      if (code === 111) reject(new PortRefused(`nothing is listening on port ${port} in the sandbox`));
      else reject(new Error(stderr.trim() || `connect helper exited with ${code}`));
    });
  });
}

/**
 * CAPTURE (perl/capture.pl): opens the egress proxy's listeners (TCP ports, and DNS on 53/udp)
 * inside the network namespace of PID (started at START) and hands them to the platform, as the
 * holder does at creation: used when a restarted platform re-adopts running sandboxes (the
 * listeners of the previous process went with it). A Perl process of a few milliseconds instead
 * of a Node helper per sandbox.
 */

/** The egress listeners opened anew in the network namespace of `pid` (re-adoption after a restart). */
export function captureInNamespace(
  sys: LauncherSyscalls,
  pid: number,
  start: number,
  capture: { tcpPorts: number[]; dns: boolean },
  timeoutMs = 10_000,
): Promise<CapturedNetwork> {
  const sysArg = Object.entries(sys)
    .map(([k, v]) => `${k}=${v}`)
    .join(",");
  return new Promise((resolve, reject) => {
    const child = spawn(
      "/usr/bin/perl",
      [
        ...perlArgs("capture"),
        sysArg,
        String(pid),
        String(start),
        capture.tcpPorts.join(","),
        capture.dns ? "dns" : "nodns",
      ],
      { stdio: ["ignore", "ignore", "pipe", "ipc"], env: {} },
    );
    const got: CapturedNetwork = { tcp: new Map(), udp: [], errors: [] };
    let done = false;
    let stderr = "";
    const timer = setTimeout(() => child.kill("SIGKILL"), timeoutMs);
    child.stderr!.on("data", (d: Buffer) => (stderr += d.toString()));
    child.on("message", (msg: { kind: string; port?: number; family?: string; message?: string }, handle: unknown) => {
      if (msg.kind === "tcp" && handle) got.tcp.set(msg.port!, handle as net.Server);
      else if (msg.kind === "udp" && handle) got.udp.push(handle as dgram.Socket);
      else if (msg.kind === "error") got.errors.push(`${msg.family ?? "tcp"} port ${msg.port}: ${msg.message}`);
      else if (msg.kind === "done") {
        // Messages arrive in order: every listener came before this.
        done = true;
        clearTimeout(timer);
        resolve(got);
      }
    });
    child.on("error", (err) => {
      clearTimeout(timer);
      reject(err);
    });
    // 'exit' can come before the last messages are read from the channel: decide on 'close'.
    child.on("close", (code) => {
      clearTimeout(timer);
      if (done) return;
      for (const l of got.tcp.values()) l.close();
      for (const u of got.udp) u.close();
      reject(new Error(stderr.trim() || `capture helper exited with ${code}`));
    });
  });
}
