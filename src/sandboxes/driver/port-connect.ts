import { spawn } from "node:child_process";
import type dgram from "node:dgram";
import type net from "node:net";
import type { CapturedNetwork } from "./driver.ts";
import { LISTENER_HANDOVER } from "./listener-handover.ts";
import type { LauncherSyscalls } from "./seccomp.ts";

/**
 * The Perl fragment both helpers start with: enter the network namespace of $pid, but only while
 * $pid still has the start time $start (a recycled pid must never put a socket into another
 * namespace). The namespace handle is opened before the check, so it cannot belong to a later
 * process. Needs %S (syscall numbers) and fail(MESSAGE).
 */
const JOIN_NET_NAMESPACE = String.raw`open(my $ns, "<", "/proc/$pid/ns/net") or fail("sandbox is not running");
open(my $st, "<", "/proc/$pid/stat") or fail("sandbox is not running");
my $stat = <$st>; close($st);
my @f = split / /, substr($stat, rindex($stat, ")") + 2);
$f[19] eq $start or fail("sandbox is not running");
syscall($S{setns}, fileno($ns), 0x40000000) == 0 or fail("setns");`;

/**
 * CONNECT: opens a TCP connection to 127.0.0.1:PORT (then [::1]:PORT) *inside* a sandbox's network
 * namespace and hands the connected socket to the platform over Node's IPC channel (SCM_RIGHTS in
 * Node's own handle framing, as the holder does for the egress listeners), so the platform gets an
 * ordinary net.Socket. Nothing runs inside the sandbox; the process lives a few milliseconds.
 * It refuses unless PID still has the start time START (a recycled pid must never put the
 * connection into another namespace).
 *   perl -e CONNECT SYS PID START PORT
 */
export const CONNECT = String.raw`my %S = map { split /=/ } split /,/, shift @ARGV;
my ($pid, $start, $port) = @ARGV;
sub fail { print STDERR "$_[0]: $!\n"; exit($_[1] // 120) }
${JOIN_NET_NAMESPACE}
my $s;
socket($s, 2, 1, 0) or fail("socket");
if (!connect($s, pack("S n a4 x8", 2, $port, pack("C4", 127, 0, 0, 1)))) {
  close($s);
  socket($s, 10, 1, 0) or fail("connection refused", 111);
  connect($s, pack("S n N a16 N", 10, $port, 0, ("\0" x 15) . "\1", 0)) or fail("connection refused", 111);
}
my $fdn = $ENV{NODE_CHANNEL_FD};
open(my $ch, "+<&=", $fdn) or fail("ipc channel");
my $data = qq({"cmd":"NODE_HANDLE","type":"net.Socket","msg":{"kind":"socket"}}\n);
my $iov = pack("P Q", $data, length($data));
my $cmsg = pack("Q i i i x4", 20, 1, 1, fileno($s));
my $msg = pack("Q L x4 P Q P Q i x4", 0, 0, $iov, 1, $cmsg, 24, 0);
syscall($S{sendmsg}, $fdn + 0, $msg, 0) == length($data) or fail("sendmsg");
my $ack = "";
while (index($ack, "\n") < 0) { sysread($ch, $ack, 256, length($ack)) or fail("ipc acknowledgement"); }
exit 0;`;

export class PortRefused extends Error {}

/** A socket connected to `port` on the loopback of the network namespace of `pid` (started at `start`). */
export function connectInNamespace(sys: LauncherSyscalls, pid: number, start: number, port: number, timeoutMs = 5000): Promise<net.Socket> {
  const sysArg = Object.entries(sys)
    .map(([k, v]) => `${k}=${v}`)
    .join(",");
  return new Promise((resolve, reject) => {
    const child = spawn("/usr/bin/perl", ["-e", CONNECT, sysArg, String(pid), String(start), String(port)], { stdio: ["ignore", "ignore", "pipe", "ipc"], env: {} });
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
 * CAPTURE: opens the egress proxy's listeners (TCP PORTS, and DNS on 53/udp when DNS is "dns")
 * inside the network namespace of PID (started at START) and hands them to the platform, as the
 * holder does at creation: used when a restarted platform re-adopts running sandboxes (the
 * listeners of the previous process went with it). A Perl process of a few milliseconds instead
 * of a Node helper per sandbox.
 *   perl -e CAPTURE SYS PID START PORTS DNS
 */
export const CAPTURE = String.raw`my %S = map { split /=/ } split /,/, shift @ARGV;
my ($pid, $start, $ports, $dns) = @ARGV;
sub fail { print STDERR "$_[0]: $!\n"; exit 120 }
${JOIN_NET_NAMESPACE}
my $fdn = $ENV{NODE_CHANNEL_FD} + 0;
open(my $ch, "+<&=", $fdn) or fail("ipc channel");
my @ports = grep { length } split /,/, $ports;
my $keep = sub { close($_[0]) };
${LISTENER_HANDOVER}
exit 0;`;

/** The egress listeners opened anew in the network namespace of `pid` (re-adoption after a restart). */
export function captureInNamespace(sys: LauncherSyscalls, pid: number, start: number, capture: { tcpPorts: number[]; dns: boolean }, timeoutMs = 10_000): Promise<CapturedNetwork> {
  const sysArg = Object.entries(sys)
    .map(([k, v]) => `${k}=${v}`)
    .join(",");
  return new Promise((resolve, reject) => {
    const child = spawn("/usr/bin/perl", ["-e", CAPTURE, sysArg, String(pid), String(start), capture.tcpPorts.join(","), capture.dns ? "dns" : "nodns"], { stdio: ["ignore", "ignore", "pipe", "ipc"], env: {} });
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
