import type { ChildProcess } from "node:child_process";
import type dgram from "node:dgram";
import type net from "node:net";
import type { CapturedNetwork } from "./driver.ts";

/**
 * LISTENER_HANDOVER: the Perl fragment that opens the egress proxy's listeners in the network
 * namespace the process stands in and hands each to the platform over Node's IPC channel
 * (SCM_RIGHTS in Node's own NODE_HANDLE framing, one handle in flight at a time), then says
 * `{"kind":"done"}`. Shared by the sandbox holder (at creation) and the capture helper (at
 * re-adoption after a restart), so both open the same sockets the same way.
 * The script that embeds it must define: %S (syscall numbers), fail(MESSAGE), $fdn (the IPC
 * channel's fd number) and $ch (a handle on it), @ports (the TCP ports), $dns ("dns" for DNS on
 * 53/udp), and $keep (called with each socket once passed: the holder keeps it open until the end,
 * the capture helper closes it).
 */
export const LISTENER_HANDOVER = String.raw`my $pass = sub {
  my ($fd, $json) = @_;
  my $data = "$json\n";
  my $iov = pack("P Q", $data, length($data));
  my $cmsg = pack("Q i i i x4", 20, 1, 1, $fd);
  my $msg = pack("Q L x4 P Q P Q i x4", 0, 0, $iov, 1, $cmsg, 24, 0);
  syscall($S{sendmsg}, $fdn, $msg, 0) == length($data) or fail("sendmsg");
  # One handle in flight at a time, as Node's own sender does: wait for its acknowledgement.
  my $ack = "";
  while (index($ack, "\n") < 0) { sysread($ch, $ack, 256, length($ack)) or fail("ipc acknowledgement"); }
};
my $report = sub { my ($port, $family, $why) = @_; $why =~ s/["\\]//g; syswrite($ch, qq({"kind":"error","port":$port,"family":"$family","message":"$why"}\n)); };
for my $port (@ports) {
  my $l;
  if (socket($l, 10, 1, 0)) {
    setsockopt($l, 1, 2, pack("i", 1));
    setsockopt($l, 41, 26, pack("i", 0));
    bind($l, pack("S n N a16 N", 10, $port, 0, "\0" x 16, 0)) or do { close($l); undef $l; };
  } else { undef $l; }
  if (!$l) {
    socket($l, 2, 1, 0) or fail("socket");
    setsockopt($l, 1, 2, pack("i", 1));
    bind($l, pack("S n a4 x8", 2, $port, "\0" x 4)) or do { $report->($port, "tcp", "$!"); close($l); next; };
  }
  listen($l, 1024) or do { $report->($port, "tcp", "$!"); close($l); next; };
  $pass->(fileno($l), qq({"cmd":"NODE_HANDLE","type":"net.Server","msg":{"kind":"tcp","port":$port}}));
  $keep->($l);
}
if ($dns eq "dns") {
  if (socket(my $u4, 2, 2, 0)) {
    if (bind($u4, pack("S n a4 x8", 2, 53, "\0" x 4))) { $pass->(fileno($u4), qq({"cmd":"NODE_HANDLE","type":"dgram.Socket","dgramType":"udp4","msg":{"kind":"udp","family":"udp4"}})); }
    else { $report->(53, "udp4", "$!"); }
    $keep->($u4);
  }
  if (socket(my $u6, 10, 2, 0)) {
    setsockopt($u6, 41, 26, pack("i", 1));
    if (bind($u6, pack("S n N a16 N", 10, 53, 0, "\0" x 16, 0))) { $pass->(fileno($u6), qq({"cmd":"NODE_HANDLE","type":"dgram.Socket","dgramType":"udp6","msg":{"kind":"udp","family":"udp6"}})); }
    $keep->($u6);
  }
}
syswrite($ch, qq({"kind":"done"}\n)) or fail("ipc");`;

/**
 * The platform's side of the handover: records each listener the holder passes over `child`'s IPC
 * channel in `captured` (by kind), errors as text, and `done` once the holder says so.
 */
export function receiveListeners(child: ChildProcess, captured: CapturedNetwork & { done: boolean }): void {
  child.on("message", (msg: { kind: string; port?: number; family?: string; message?: string }, handle: unknown) => {
    if (msg.kind === "tcp" && handle) captured.tcp.set(msg.port!, handle as net.Server);
    else if (msg.kind === "udp" && handle) captured.udp.push(handle as dgram.Socket);
    else if (msg.kind === "error") captured.errors.push(`${msg.family ?? "tcp"} port ${msg.port}: ${msg.message}`);
    else if (msg.kind === "done") captured.done = true;
  });
  // The holder closes its end once done; a channel error (the holder died) shows as its exit.
  child.on("error", () => {});
}
