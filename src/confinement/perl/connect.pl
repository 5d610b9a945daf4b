# CONNECT: opens a TCP connection to 127.0.0.1:PORT (then [::1]:PORT) *inside* a sandbox's network
# namespace and hands the connected socket to the platform over Node's IPC channel (SCM_RIGHTS in
# Node's own handle framing, as the holder does for the egress listeners), so the platform gets an
# ordinary net.Socket. Nothing runs inside the sandbox; the process lives a few milliseconds.
# It refuses unless PID still has the start time START (join-netns.pl).
#   perl -e join-netns.pl -e connect.pl SYS PID START PORT     (Node's IPC channel in NODE_CHANNEL_FD)
# Exit 111: nothing listens on the port; 120: any other failure (message on stderr).
use strict;

use constant {
  AF_INET     => 2,
  AF_INET6    => 10,
  SOCK_STREAM => 1,
  SOL_SOCKET  => 1,
  SCM_RIGHTS  => 1,
  CMSG_LEN    => 20,
  CMSG_SPACE  => 24,
  EXIT_REFUSED => 111,
  EXIT_FAILED  => 120,
};

my %S = map { split /=/ } split /,/, shift @ARGV;
my ($pid, $start, $port) = @ARGV;
sub fail { print STDERR "$_[0]: $!\n"; exit($_[1] // EXIT_FAILED) }
WharfNetns::join_net_namespace(\%S, $pid, $start);
my $s;
socket($s, AF_INET, SOCK_STREAM, 0) or fail("socket");
if (!connect($s, pack("S n a4 x8", AF_INET, $port, pack("C4", 127, 0, 0, 1)))) {
  close($s);
  socket($s, AF_INET6, SOCK_STREAM, 0) or fail("connection refused", EXIT_REFUSED);
  connect($s, pack("S n N a16 N", AF_INET6, $port, 0, ("\0" x 15) . "\1", 0)) or fail("connection refused", EXIT_REFUSED);
}
my $fdn = $ENV{NODE_CHANNEL_FD};
open(my $ch, "+<&=", $fdn) or fail("ipc channel");
my $data = qq({"cmd":"NODE_HANDLE","type":"net.Socket","msg":{"kind":"socket"}}\n);
my $iov = pack("P Q", $data, length($data));
my $cmsg = pack("Q i i i x4", CMSG_LEN, SOL_SOCKET, SCM_RIGHTS, fileno($s));
my $msg = pack("Q L x4 P Q P Q i x4", 0, 0, $iov, 1, $cmsg, CMSG_SPACE, 0);
syscall($S{sendmsg}, $fdn + 0, $msg, 0) == length($data) or fail("sendmsg");
my $ack = "";
while (index($ack, "\n") < 0) { sysread($ch, $ack, 256, length($ack)) or fail("ipc acknowledgement"); }
exit 0;
