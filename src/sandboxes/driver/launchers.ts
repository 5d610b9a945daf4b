/**
 * The two small programs that start sandbox processes, in Perl because perl-base is part of every
 * Debian system, starts in about a millisecond, and can make raw system calls: each replaces a
 * chain of 4-6 processes (sh, unshare, ip, mount, setpriv / sh, nsenter) with one. Syscall numbers
 * come from the platform (per architecture) as the first argument, `name=number,...`.
 */

import type { ChildProcess } from "node:child_process";
import type net from "node:net";
import { LISTENER_HANDOVER } from "./listener-handover.ts";

/**
 * HOLDER: the sandbox's first process, run as root. Joins the sandbox's cgroups (before it can
 * fork), creates its network and mount namespaces (root-owned: nothing inside can change routes),
 * brings up loopback, mounts the overlay, tells the platform (fd 4: "netns") and waits for it to
 * attach the egress proxy (fd 5: a line), then drops to the unprivileged host uid and execs
 * bubblewrap, which builds the user/pid/ipc/uts/cgroup namespaces and loads the seccomp filter.
 * With a disk image (hard fs_capacity_bytes), it first loop-mounts the image (ext4) at DISKMNT in
 * the same private namespace; the writable layer lives inside it and the loop device goes away
 * with the namespace.
 *
 * CAPTURE ("-" for none, else "PORT,PORT,…" and a DNS flag "dns"/"nodns") is what the egress proxy
 * needs in the namespace: every destination routed to loopback (`local default`), and listening
 * sockets for those TCP ports and for DNS, opened here and handed to the platform over Node's IPC
 * channel (fd 6, SCM_RIGHTS, Node's own NODE_HANDLE framing: the platform receives ordinary
 * net.Server / dgram.Socket objects). Doing this in the process that already stands in the new
 * namespace replaces an nsenter'd Node helper whose start-up was most of create → ready.
 *   perl -e HOLDER SYS CGFILES(:) CAPTURE DNS IMAGE|- DISKMNT LOWER UPPER WORK MNT BPF HOSTUID -- bwrap args...
 */
export const HOLDER = String.raw`$^F = 255;
my %S = map { split /=/ } split /,/, shift @ARGV;
my ($cg, $capture, $dns, $img, $diskmnt, $lower, $upper, $work, $mnt, $bpf, $huid, $sep, @bwrap) = @ARGV;
my $starter = getppid();
sub fail { print STDERR "wharf holder: $_[0]: $!\n"; exit 120 }
for my $f (grep { length } split /:/, $cg) { open(my $h, ">>", $f) or fail("cgroup $f"); print $h "$$\n"; close($h) or fail("cgroup $f"); }
syscall($S{unshare}, 0x40000000 | 0x00020000) == 0 or fail("unshare");
# syscall() hands strings over as writable buffers: literals are read-only, so use copies.
my ($none, $slash, $ovl) = ("none", "/", "overlay");
syscall($S{mount}, $none, $slash, 0, 16384 | 262144, 0) == 0 or fail("make mounts private");
socket(my $s, 2, 2, 0) or fail("socket");
my $ifr = pack("a16 s x22", "lo", 0x1 | 0x8 | 0x40);
ioctl($s, 0x8914, $ifr) or fail("loopback up");
close($s);
if ($capture ne "-") {
  system("ip", "route", "replace", "local", "default", "dev", "lo", "table", "local") == 0 or fail("route to loopback");
  # IPv6 may be disabled in the namespace: then there is nothing to capture there.
  system("sh", "-c", "ip -6 route replace local default dev lo table local 2>/dev/null");
  my $fdn = 6;
  open(my $ch, "+<&=", $fdn) or fail("ipc channel");
  my @ports = split /,/, $capture;
  my @mine;
  my $keep = sub { push @mine, $_[0] };
${LISTENER_HANDOVER}
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
my $opts = "lowerdir=$lower,upperdir=$upper,workdir=$work";
my $fstype = $ovl;
syscall($S{mount}, $ovl, $mnt, $fstype, 2 | 4, $opts) == 0 or fail("mount overlay");
open(my $info, ">&=", 4) or fail("fd 4");
syswrite($info, "netns\n");
open(my $gate, "<&=", 5) or fail("fd 5");
my $go = <$gate>;
close($gate);
defined($go) or exit 121;
open(my $b, "<", $bpf) or fail("seccomp program");
fileno($b) == 3 or fail("seccomp program is not fd 3");
syscall($S{setgroups}, 0, 0) == 0 or fail("setgroups");
syscall($S{setresgid}, $huid+0, $huid+0, $huid+0) == 0 or fail("setresgid");
syscall($S{setresuid}, $huid+0, $huid+0, $huid+0) == 0 or fail("setresuid");
# bwrap --die-with-parent arms the parent-death signal only once it runs: a platform killed between
# its "go" and then would leave bwrap orphaned. Arm it here (the uid change above clears it; exec
# keeps it), then make sure the platform that started us did not die before.
if (grep { $_ eq "--die-with-parent" } @bwrap) {
  syscall($S{prctl}, 1, 9, 0, 0, 0) == 0 or fail("parent-death signal");
  getppid() == $starter or exit 122;
}
exec { "bwrap" } "bwrap", @bwrap or fail("exec bwrap");`;

/**
 * Lets a parked HOLDER go on: the word on its fd 5. A holder that dies first (a stop while it
 * starts, its own failure) closes its end with the word unread, and ours then reads ECONNRESET:
 * without a listener that is an uncaught exception in the platform. Its exit says what happened.
 */
export function releaseHolder(child: ChildProcess): void {
  const gate = (child.stdio as unknown as net.Socket[])[5];
  gate.on("error", () => {
    // The holder is gone before it read the word; whoever waits for it sees its exit.
  });
  gate.end("go\n");
}

/** The launcher's fd from which ENTER reads the command's environment. */
export const ENTER_ENV_FD = 4;

/** What ENTER reads from ENTER_ENV_FD: each `NAME=VALUE` hex-encoded (no separator a value could forge), one a line. */
export function enterEnvironment(env: Record<string, string>): string {
  return Object.entries(env)
    .map(([k, v]) => `${Buffer.from(`${k}=${v}`, "utf8").toString("hex")}\n`)
    .join("");
}

/**
 * ENTER: runs one command in a running sandbox, as root until it drops. Joins the cgroups, enters
 * every namespace of the sandbox's pid 1 (the user namespace last: entering it first would give up
 * the right to enter the root-owned network namespace), takes its root, clears supplementary
 * groups, forks into the pid namespace, becomes uid/gid 1000, starts its own session (so a kill
 * reaches the whole process group), sets no-new-privs and the seccomp filter, the per-file size
 * limit and the working directory, and execs. The parent waits and exits as the command did.
 * The launcher itself runs with an empty environment (PERL5OPT, PERL5LIB, LD_PRELOAD and friends
 * from a request must never reach a root process); the command's environment (sandbox env_vars,
 * sealed at rest) arrives on fd 4, never as arguments (any local user reads a command line): one
 * hex-encoded `NAME=VALUE` a line, read to its end before anything else and installed only in the
 * child. It refuses to run unless the target is still the
 * sandbox's init (same start time, and a user namespace other than the host's): a recycled pid
 * must never put a command into the host's namespaces.
 * With PTY = "ROWSxCOLS" (else "-") the command gets a pseudo-terminal from the sandbox's own
 * devpts as its controlling terminal (stdin, stdout and stderr), and the launcher's uid-1000 child
 * pumps bytes between it and the launcher's stdin/stdout; lines "ROWS COLS" on fd 3 resize it;
 * end of stdin is sent as the terminal's EOF character.
 *   perl -e ENTER SYS PID START CGFILES(:) SECCOMPHEX|- FSIZE CWD PTY -- argv...   (env on fd 4)
 */
export const ENTER = String.raw`my %S = map { split /=/ } split /,/, shift @ARGV;
my ($pid, $start, $cg, $hex, $fsize, $cwd, $pty) = splice(@ARGV, 0, 7);
my ($sep, @cmd) = @ARGV;
sub fail { print STDERR "wharf: $_[0]: $!\n"; exit 125 }
# Read (and close: the command must not inherit it) the environment before opening anything else.
open(my $envfh, "<&=", ${ENTER_ENV_FD}) or fail("environment");
my $envtext = do { local $/; <$envfh> };
close($envfh);
defined($envtext) or fail("environment");
my @env = map { pack("H*", $_) } grep { /^[0-9a-f]+$/ } split /\n/, $envtext;
for my $f (grep { length } split /:/, $cg) { open(my $h, ">>", $f) or fail("cgroup $f"); print $h "$$\n"; close($h) or fail("cgroup $f"); }
my @ns;
for (["ipc", 0x08000000], ["uts", 0x04000000], ["net", 0x40000000], ["cgroup", 0x02000000], ["pid", 0x20000000], ["mnt", 0x00020000], ["user", 0x10000000]) {
  open(my $fh, "<", "/proc/$pid/ns/$_->[0]") or fail("sandbox is not running");
  push @ns, [$fh, $_->[1]];
}
opendir(my $root, "/proc/$pid/root") or fail("sandbox root");
# The namespace handles are open: check they belong to the sandbox's init and not to a recycled pid.
open(my $st, "<", "/proc/$pid/stat") or fail("sandbox is not running");
my $stat = <$st>; close($st);
my @f = split / /, substr($stat, rindex($stat, ")") + 2);
$f[19] eq $start or do { print STDERR "wharf: sandbox is not running\n"; exit 125 };
readlink("/proc/$pid/ns/user") ne readlink("/proc/self/ns/user") or do { print STDERR "wharf: target is not a sandbox\n"; exit 125 };
syscall($S{setgroups}, 0, 0) == 0 or fail("setgroups");
for (@ns) {
  if ($_->[1] == 0x10000000) { chdir($root) or fail("fchdir root"); chroot(".") or fail("chroot"); }
  syscall($S{setns}, fileno($_->[0]), $_->[1]) == 0 or fail("setns");
}
my $child = fork();
defined($child) or fail("fork");
if ($child) {
  $SIG{$_} = "IGNORE" for qw(INT TERM HUP QUIT PIPE);
  waitpid($child, 0);
  my $st = $?;
  if ($st & 127) { $SIG{$st & 127} = "DEFAULT"; kill($st & 127, $$); }
  exit($st >> 8);
}
%ENV = map { split(/=/, $_, 2) } @env;
syscall($S{setresgid}, 1000, 1000, 1000) == 0 or fail("setresgid");
syscall($S{setresuid}, 1000, 1000, 1000) == 0 or fail("setresuid");
sub confine {
  if ($hex ne "-") {
    my $f = pack("H*", $hex);
    my $p = pack("S x6 a8", length($f) / 8, pack("p", $f));
    syscall($S{prctl}, 38, 1, 0, 0, 0) == 0 or fail("no_new_privs");
    syscall($S{prctl}, 22, 2, $p, 0, 0) == 0 or fail("seccomp");
  }
  my $rlim = pack("QQ", $fsize, $fsize);
  syscall($S{setrlimit}, 1, $rlim) if $fsize > 0;
  chdir($cwd) or do { print STDERR "wharf: cannot change directory to $cwd: $!\n"; exit 125 };
  exec { $cmd[0] } @cmd or do { print STDERR "wharf: cannot run $cmd[0]: $!\n"; exit 127 };
}
if ($pty eq "-") { syscall($S{setsid}); confine(); }
my ($rows, $cols) = split /x/, $pty;
open(my $m, "+<", "/dev/ptmx") or fail("no pseudo-terminal in the sandbox");
# ioctl() needs writable buffers (literals are read-only): use copies.
my $unlock = pack("i", 0);
ioctl($m, 0x40045431, $unlock) or fail("unlockpt");
my $pn = pack("i", 0);
ioctl($m, 0x80045430, $pn) or fail("ptsname");
my $tty = "/dev/pts/" . unpack("i", $pn);
my $ws = pack("S4", $rows, $cols, 0, 0);
ioctl($m, 0x5414, $ws);
my $k = fork();
defined($k) or fail("fork");
if ($k == 0) {
  close($m);
  if (open(my $c3, "<&=", 3)) { close($c3); }
  syscall($S{setsid});
  open(my $t, "+<", $tty) or fail("open $tty");
  ioctl($t, 0x540E, 0);
  open(STDIN, "<&", $t) or fail("stdin"); open(STDOUT, ">&", $t) or fail("stdout"); open(STDERR, ">&", $t) or fail("stderr");
  close($t);
  confine();
}
$SIG{PIPE} = "IGNORE";
my ($in, $ctl, $buf, $line) = (1, open(my $cf, "<&=", 3) ? 1 : 0, "", "");
my $done = 0;
for (;;) {
  my $rin = "";
  vec($rin, fileno($m), 1) = 1;
  vec($rin, 0, 1) = 1 if $in;
  vec($rin, 3, 1) = 1 if $ctl;
  my $n = select(my $rout = $rin, undef, undef, $done ? 0 : 0.2);
  if ($n > 0 && vec($rout, fileno($m), 1)) {
    my $r = sysread($m, $buf, 65536);
    last if !$r;
    syswrite(STDOUT, $buf);
  }
  if ($n > 0 && $in && vec($rout, 0, 1)) {
    my $r = sysread(STDIN, $buf, 65536);
    if ($r) { syswrite($m, $buf); } else { $in = 0; syswrite($m, "\x04"); }
  }
  if ($n > 0 && $ctl && vec($rout, 3, 1)) {
    my $r = sysread($cf, $buf, 4096);
    if (!$r) { $ctl = 0; } else {
      $line .= $buf;
      while ($line =~ s/^(\d+) (\d+)\n//) { my $sz = pack("S4", $1, $2, 0, 0); ioctl($m, 0x5414, $sz); }
      $line = "" if length($line) > 64;
    }
  }
  # The command is gone: drain what the terminal still holds, then stop (background jobs may keep it open).
  last if $done && $n <= 0;
  $done = 1 if !$done && waitpid($k, 1) > 0;
}
my $st = $done ? $? : do { waitpid($k, 0); $? };
exit($st & 127 ? 128 + ($st & 127) : $st >> 8);`;
