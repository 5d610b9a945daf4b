# Enters the network namespace of $pid, but only while $pid still has the start time $start (a
# recycled pid must never put a socket into another namespace). The namespace handle is opened
# before the check, so it cannot belong to a later process. A library of connect.pl and capture.pl.
package WharfNetns;
use strict;

use constant {
  CLONE_NEWNET => 0x40000000,
  # Field 22 of /proc/PID/stat (starttime), counted from the field after the command's ")".
  STAT_STARTTIME => 19,
};

# join_net_namespace(\%syscalls, $pid, $start): returns in the namespace, or fails.
sub join_net_namespace {
  my ($S, $pid, $start) = @_;
  open(my $ns, "<", "/proc/$pid/ns/net") or main::fail("sandbox is not running");
  open(my $st, "<", "/proc/$pid/stat") or main::fail("sandbox is not running");
  my $stat = <$st>; close($st);
  my @f = split / /, substr($stat, rindex($stat, ")") + 2);
  $f[STAT_STARTTIME] eq $start or main::fail("sandbox is not running");
  syscall($S->{setns}, fileno($ns), CLONE_NEWNET) == 0 or main::fail("setns");
}

package main;
1;
