# HOLDER: a sandbox's (or a confined service's) first process, run as root. Joins the cgroups
# (before it can fork), creates its network and mount namespaces (root-owned: nothing inside can
# change routes), brings up loopback, mounts the overlay, tells the platform (INFO_FD: "netns") and
# waits for it to attach the egress proxy (GATE_FD: a line), then drops to the unprivileged host uid
# and execs bubblewrap, which builds the user/pid/ipc/uts/cgroup namespaces and loads the seccomp
# filter. With a disk image (hard fs_capacity_bytes), it first loop-mounts the image (ext4) at
# DISKMNT in the same private namespace; the writable layer lives inside it and the loop device
# goes away with the namespace.
#
# CAPTURE ("-" for none, else "PORT,PORT,…" and a DNS flag "dns"/"nodns") is what the egress proxy
# needs in the namespace: every destination routed to loopback (`local default`), and listening
# sockets for those TCP ports and for DNS, opened here and handed to the platform over Node's IPC
# channel (IPC_FD, listener-handover.pl). Doing this in the process that already stands in the new
# namespace replaces an nsenter'd Node helper whose start-up was most of create → ready.
#
# A confined service's holder is the same program with service-stage.pl loaded: its stage_binds()
# then replaces the overlay mount (LOWER is then the bind list, MNT the staging folder).
#   perl -e listener-handover.pl [-e service-stage.pl] -e holder.pl \
#     SYS CGFILES(:) CAPTURE DNS IMAGE|- DISKMNT LOWER UPPER WORK MNT BPF HOSTUID -- bwrap args...
use strict;

use constant {
  CLONE_NEWNET => 0x40000000,
  CLONE_NEWNS  => 0x00020000,
  MS_NOSUID    => 2,
  MS_NODEV     => 4,
  MS_REC       => 16384,
  MS_PRIVATE   => 262144,
  AF_INET      => 2,
  SOCK_DGRAM   => 2,
  SIOCSIFFLAGS => 0x8914,
  IFF_UP       => 0x1,
  IFF_LOOPBACK => 0x8,
  IFF_RUNNING  => 0x40,
  PR_SET_PDEATHSIG => 1,
  SIGKILL      => 9,
  # Descriptors the platform hands over: the seccomp program must open as 3.
  SECCOMP_FD   => 3,
  INFO_FD      => 4,
  GATE_FD      => 5,
  IPC_FD       => 6,
};

$^F = 255;
my %S = map { split /=/ } split /,/, shift @ARGV;
my ($cg, $capture, $dns, $img, $diskmnt, $lower, $upper, $work, $mnt, $bpf, $huid, $sep, @bwrap) = @ARGV;
my $starter = getppid();
sub fail { print STDERR "wharf holder: $_[0]: $!\n"; exit 120 }
for my $f (grep { length } split /:/, $cg) { open(my $h, ">>", $f) or fail("cgroup $f"); print $h "$$\n"; close($h) or fail("cgroup $f"); }
syscall($S{unshare}, CLONE_NEWNET | CLONE_NEWNS) == 0 or fail("unshare");
# syscall() hands strings over as writable buffers: literals are read-only, so use copies.
my ($none, $slash, $ovl) = ("none", "/", "overlay");
syscall($S{mount}, $none, $slash, 0, MS_REC | MS_PRIVATE, 0) == 0 or fail("make mounts private");
socket(my $s, AF_INET, SOCK_DGRAM, 0) or fail("socket");
my $ifr = pack("a16 s x22", "lo", IFF_UP | IFF_LOOPBACK | IFF_RUNNING);
ioctl($s, SIOCSIFFLAGS, $ifr) or fail("loopback up");
close($s);
if ($capture ne "-") {
  system("ip", "route", "replace", "local", "default", "dev", "lo", "table", "local") == 0 or fail("route to loopback");
  # IPv6 may be disabled in the namespace: then there is nothing to capture there.
  system("sh", "-c", "ip -6 route replace local default dev lo table local 2>/dev/null");
  open(my $ch, "+<&=", IPC_FD) or fail("ipc channel");
  my @ports = split /,/, $capture;
  my @mine;
  WharfHandover::hand_over(\%S, IPC_FD, $ch, \@ports, $dns, sub { push @mine, $_[0] });
  # Our copies must go: a second reader of the DNS socket would steal queries, and nothing of the
  # platform's channel may reach the sandbox.
  close($_) for @mine;
  close($ch);
}
delete @ENV{qw(NODE_CHANNEL_FD NODE_CHANNEL_SERIALIZATION_MODE)};
if ($img ne "-") {
  # noinit_itable: the kernel must not zero the image's inode tables in the background (that
  # would turn a sparse image into real disk use).
  system("mount", "-o", "loop,nosuid,nodev,noinit_itable", $img, $diskmnt) == 0 or fail("mount disk image");
  # The overlay's work dir must start empty ("-": a confined service's disk, no overlay on it).
  if ($work ne "-") {
    system("rm", "-rf", "--", $work) == 0 or fail("reset work dir");
    mkdir($work, 0700) or fail("work dir");
  }
}
if (defined &WharfStage::stage_binds) {
  WharfStage::stage_binds(\%S, $cg, $mnt, $lower, $upper, $huid);
} else {
  my $opts = "lowerdir=$lower,upperdir=$upper,workdir=$work";
  my $fstype = $ovl;
  syscall($S{mount}, $ovl, $mnt, $fstype, MS_NOSUID | MS_NODEV, $opts) == 0 or fail("mount overlay");
}
open(my $info, ">&=", INFO_FD) or fail("fd 4");
syswrite($info, "netns\n");
open(my $gate, "<&=", GATE_FD) or fail("fd 5");
my $go = <$gate>;
close($gate);
defined($go) or exit 121;
open(my $b, "<", $bpf) or fail("seccomp program");
fileno($b) == SECCOMP_FD or fail("seccomp program is not fd 3");
syscall($S{setgroups}, 0, 0) == 0 or fail("setgroups");
syscall($S{setresgid}, $huid+0, $huid+0, $huid+0) == 0 or fail("setresgid");
syscall($S{setresuid}, $huid+0, $huid+0, $huid+0) == 0 or fail("setresuid");
# bwrap --die-with-parent arms the parent-death signal only once it runs: a platform killed between
# its "go" and then would leave bwrap orphaned. Arm it here (the uid change above clears it; exec
# keeps it), then make sure the platform that started us did not die before.
if (grep { $_ eq "--die-with-parent" } @bwrap) {
  syscall($S{prctl}, PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) == 0 or fail("parent-death signal");
  getppid() == $starter or exit 122;
}
exec { "bwrap" } "bwrap", @bwrap or fail("exec bwrap");
