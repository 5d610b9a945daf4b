# Opens the egress proxy's listeners in the network namespace the process stands in and hands each
# to the platform over Node's IPC channel (SCM_RIGHTS in Node's own NODE_HANDLE framing, one handle
# in flight at a time), then says {"kind":"done"}. A library: the sandbox holder (holder.pl, at
# creation) and the capture helper (capture.pl, at re-adoption after a restart) both call
# hand_over(), so both open the same sockets the same way.
package WharfHandover;
use strict;

use constant {
  AF_INET      => 2,
  AF_INET6     => 10,
  SOCK_STREAM  => 1,
  SOCK_DGRAM   => 2,
  SOL_SOCKET   => 1,
  SO_REUSEADDR => 2,
  IPPROTO_IPV6 => 41,
  IPV6_V6ONLY  => 26,
  SCM_RIGHTS   => 1,
  # struct cmsghdr with one int: CMSG_LEN(sizeof(int)) and the padded CMSG_SPACE.
  CMSG_LEN     => 20,
  CMSG_SPACE   => 24,
  DNS_PORT     => 53,
  LISTEN_BACKLOG => 1024,
};

# hand_over(\%syscalls, $fdn, $ch, \@ports, $dns, $keep):
#   $fdn: the IPC channel's fd number, $ch: a handle on it; @ports: the TCP ports; $dns: "dns" for
#   DNS on 53/udp (and udp6); $keep: called with each socket once passed (the holder keeps it open
#   until the end, the capture helper closes it).
sub hand_over {
  my ($S, $fdn, $ch, $ports, $dns, $keep) = @_;
  my $pass = sub {
    my ($fd, $json) = @_;
    my $data = "$json\n";
    my $iov = pack("P Q", $data, length($data));
    my $cmsg = pack("Q i i i x4", CMSG_LEN, SOL_SOCKET, SCM_RIGHTS, $fd);
    my $msg = pack("Q L x4 P Q P Q i x4", 0, 0, $iov, 1, $cmsg, CMSG_SPACE, 0);
    syscall($S->{sendmsg}, $fdn, $msg, 0) == length($data) or main::fail("sendmsg");
    # One handle in flight at a time, as Node's own sender does: wait for its acknowledgement.
    my $ack = "";
    while (index($ack, "\n") < 0) { sysread($ch, $ack, 256, length($ack)) or main::fail("ipc acknowledgement"); }
  };
  my $report = sub { my ($port, $family, $why) = @_; $why =~ s/["\\]//g; syswrite($ch, qq({"kind":"error","port":$port,"family":"$family","message":"$why"}\n)); };
  for my $port (@$ports) {
    my $l;
    if (socket($l, AF_INET6, SOCK_STREAM, 0)) {
      setsockopt($l, SOL_SOCKET, SO_REUSEADDR, pack("i", 1));
      setsockopt($l, IPPROTO_IPV6, IPV6_V6ONLY, pack("i", 0));
      bind($l, pack("S n N a16 N", AF_INET6, $port, 0, "\0" x 16, 0)) or do { close($l); undef $l; };
    } else { undef $l; }
    if (!$l) {
      socket($l, AF_INET, SOCK_STREAM, 0) or main::fail("socket");
      setsockopt($l, SOL_SOCKET, SO_REUSEADDR, pack("i", 1));
      bind($l, pack("S n a4 x8", AF_INET, $port, "\0" x 4)) or do { $report->($port, "tcp", "$!"); close($l); next; };
    }
    listen($l, LISTEN_BACKLOG) or do { $report->($port, "tcp", "$!"); close($l); next; };
    $pass->(fileno($l), qq({"cmd":"NODE_HANDLE","type":"net.Server","msg":{"kind":"tcp","port":$port}}));
    $keep->($l);
  }
  if ($dns eq "dns") {
    if (socket(my $u4, AF_INET, SOCK_DGRAM, 0)) {
      if (bind($u4, pack("S n a4 x8", AF_INET, DNS_PORT, "\0" x 4))) { $pass->(fileno($u4), qq({"cmd":"NODE_HANDLE","type":"dgram.Socket","dgramType":"udp4","msg":{"kind":"udp","family":"udp4"}})); }
      else { $report->(DNS_PORT, "udp4", "$!"); }
      $keep->($u4);
    }
    if (socket(my $u6, AF_INET6, SOCK_DGRAM, 0)) {
      setsockopt($u6, IPPROTO_IPV6, IPV6_V6ONLY, pack("i", 1));
      if (bind($u6, pack("S n N a16 N", AF_INET6, DNS_PORT, 0, "\0" x 16, 0))) { $pass->(fileno($u6), qq({"cmd":"NODE_HANDLE","type":"dgram.Socket","dgramType":"udp6","msg":{"kind":"udp","family":"udp6"}})); }
      $keep->($u6);
    }
  }
  syswrite($ch, qq({"kind":"done"}\n)) or main::fail("ipc");
}

package main;
1;
