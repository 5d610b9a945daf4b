# CAPTURE: opens the egress proxy's listeners (TCP PORTS, and DNS on 53/udp when DNS is "dns")
# inside the network namespace of PID (started at START) and hands them to the platform, as the
# holder does at creation: used when a restarted platform re-adopts running sandboxes (the
# listeners of the previous process went with it). A Perl process of a few milliseconds instead
# of a Node helper per sandbox.
#   perl -e join-netns.pl -e listener-handover.pl -e capture.pl SYS PID START PORTS DNS
use strict;

my %S = map { split /=/ } split /,/, shift @ARGV;
my ($pid, $start, $ports, $dns) = @ARGV;
sub fail { print STDERR "$_[0]: $!\n"; exit 120 }
WharfNetns::join_net_namespace(\%S, $pid, $start);
my $fdn = $ENV{NODE_CHANNEL_FD} + 0;
open(my $ch, "+<&=", $fdn) or fail("ipc channel");
my @ports = grep { length } split /,/, $ports;
WharfHandover::hand_over(\%S, $fdn, $ch, \@ports, $dns, sub { close($_[0]) });
exit 0;
