# ENTER: runs one command in a running sandbox, as root until it drops. Checks the target, joins
# the cgroups, enters every namespace of the sandbox's pid 1 (the user namespace last: entering it
# first would give up the right to enter the root-owned network namespace), takes its root, clears supplementary
# groups, forks into the pid namespace, becomes the sandbox user (UID), starts its own session (so a
# kill reaches the whole process group), sets no-new-privs and the seccomp filter, the per-file
# size limit and the working directory, and execs. The parent waits and exits as the command did.
# The launcher itself runs with an empty environment (PERL5OPT, PERL5LIB, LD_PRELOAD and friends
# from a request must never reach a root process); the command's environment (sandbox env_vars,
# sealed at rest) arrives on ENVFD, never as arguments (any local user reads a command line): one
# hex-encoded `NAME=VALUE` a line, read to its end before anything else and installed only in the
# child. It refuses to run unless the target is still the sandbox's init (same start time, and a
# user namespace other than the host's): a recycled pid must never put a command into the host's
# namespaces.
# With PTY = "ROWSxCOLS" (else "-") the command gets a pseudo-terminal from the sandbox's own
# devpts as its controlling terminal (stdin, stdout and stderr), and the launcher's child pumps
# bytes between it and the launcher's stdin/stdout; lines "ROWS COLS" on fd 3 resize it; end of
# stdin is sent as the terminal's EOF character.
#   perl -e enter.pl SYS ENVFD UID PID START CGFILES(:) SECCOMPHEX|- FSIZE CWD PTY -- argv...
# Exit 125: the launcher failed (message on stderr); 127: the command could not be run.
use strict;

use constant {
  CLONE_NEWNS     => 0x00020000,
  CLONE_NEWCGROUP => 0x02000000,
  CLONE_NEWUTS    => 0x04000000,
  CLONE_NEWIPC    => 0x08000000,
  CLONE_NEWUSER   => 0x10000000,
  CLONE_NEWPID    => 0x20000000,
  CLONE_NEWNET    => 0x40000000,
  # Field 22 of /proc/PID/stat (starttime), counted from the field after the command's ")".
  STAT_STARTTIME  => 19,
  PR_SET_SECCOMP  => 22,
  SECCOMP_MODE_FILTER => 2,
  PR_SET_NO_NEW_PRIVS => 38,
  RLIMIT_FSIZE    => 1,
  TIOCSWINSZ      => 0x5414,
  TIOCSCTTY       => 0x540E,
  TIOCGPTN        => 0x80045430,
  TIOCSPTLCK      => 0x40045431,
  WNOHANG         => 1,
};

my %S = map { split /=/ } split /,/, shift @ARGV;
my ($envfd, $uid, $pid, $start, $cg, $hex, $fsize, $cwd, $pty) = splice(@ARGV, 0, 9);
my ($sep, @cmd) = @ARGV;
sub fail { print STDERR "wharf: $_[0]: $!\n"; exit 125 }
# Read (and close: the command must not inherit it) the environment before opening anything else.
open(my $envfh, "<&=", $envfd) or fail("environment");
my $envtext = do { local $/; <$envfh> };
close($envfh);
defined($envtext) or fail("environment");
my @env = map { pack("H*", $_) } grep { /^[0-9a-f]+$/ } split /\n/, $envtext;
my @ns;
for (["ipc", CLONE_NEWIPC], ["uts", CLONE_NEWUTS], ["net", CLONE_NEWNET], ["cgroup", CLONE_NEWCGROUP], ["pid", CLONE_NEWPID], ["mnt", CLONE_NEWNS], ["user", CLONE_NEWUSER]) {
  open(my $fh, "<", "/proc/$pid/ns/$_->[0]") or fail("sandbox is not running");
  push @ns, [$fh, $_->[1]];
}
opendir(my $root, "/proc/$pid/root") or fail("sandbox root");
# The namespace handles are open: check they belong to the sandbox's init and not to a recycled pid.
open(my $st, "<", "/proc/$pid/stat") or fail("sandbox is not running");
my $stat = <$st>; close($st);
my @f = split / /, substr($stat, rindex($stat, ")") + 2);
$f[STAT_STARTTIME] eq $start or do { print STDERR "wharf: sandbox is not running\n"; exit 125 };
readlink("/proc/$pid/ns/user") ne readlink("/proc/self/ns/user") or do { print STDERR "wharf: target is not a sandbox\n"; exit 125 };
# Into the sandbox's cgroups only once the target is known to be its init: a stale reference joins
# nothing (and is not caught in the kill of a sandbox that just died).
for my $f (grep { length } split /:/, $cg) { open(my $h, ">>", $f) or fail("cgroup $f"); print $h "$$\n"; close($h) or fail("cgroup $f"); }
syscall($S{setgroups}, 0, 0) == 0 or fail("setgroups");
for (@ns) {
  if ($_->[1] == CLONE_NEWUSER) { chdir($root) or fail("fchdir root"); chroot(".") or fail("chroot"); }
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
syscall($S{setresgid}, $uid + 0, $uid + 0, $uid + 0) == 0 or fail("setresgid");
syscall($S{setresuid}, $uid + 0, $uid + 0, $uid + 0) == 0 or fail("setresuid");
sub confine {
  if ($hex ne "-") {
    my $f = pack("H*", $hex);
    my $p = pack("S x6 a8", length($f) / 8, pack("p", $f));
    syscall($S{prctl}, PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 or fail("no_new_privs");
    syscall($S{prctl}, PR_SET_SECCOMP, SECCOMP_MODE_FILTER, $p, 0, 0) == 0 or fail("seccomp");
  }
  my $rlim = pack("QQ", $fsize, $fsize);
  syscall($S{setrlimit}, RLIMIT_FSIZE, $rlim) if $fsize > 0;
  chdir($cwd) or do { print STDERR "wharf: cannot change directory to $cwd: $!\n"; exit 125 };
  exec { $cmd[0] } @cmd or do { print STDERR "wharf: cannot run $cmd[0]: $!\n"; exit 127 };
}
if ($pty eq "-") { syscall($S{setsid}); confine(); }
my ($rows, $cols) = split /x/, $pty;
open(my $m, "+<", "/dev/ptmx") or fail("no pseudo-terminal in the sandbox");
# ioctl() needs writable buffers (literals are read-only): use copies.
my $unlock = pack("i", 0);
ioctl($m, TIOCSPTLCK, $unlock) or fail("unlockpt");
my $pn = pack("i", 0);
ioctl($m, TIOCGPTN, $pn) or fail("ptsname");
my $tty = "/dev/pts/" . unpack("i", $pn);
my $ws = pack("S4", $rows, $cols, 0, 0);
ioctl($m, TIOCSWINSZ, $ws);
my $k = fork();
defined($k) or fail("fork");
if ($k == 0) {
  close($m);
  if (open(my $c3, "<&=", 3)) { close($c3); }
  syscall($S{setsid});
  open(my $t, "+<", $tty) or fail("open $tty");
  ioctl($t, TIOCSCTTY, 0);
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
      while ($line =~ s/^(\d+) (\d+)\n//) { my $sz = pack("S4", $1, $2, 0, 0); ioctl($m, TIOCSWINSZ, $sz); }
      $line = "" if length($line) > 64;
    }
  }
  # The command is gone: drain what the terminal still holds, then stop (background jobs may keep it open).
  last if $done && $n <= 0;
  $done = 1 if !$done && waitpid($k, WNOHANG) > 0;
}
my $st = $done ? $? : do { waitpid($k, 0); $? };
exit($st & 127 ? 128 + ($st & 127) : $st >> 8);
