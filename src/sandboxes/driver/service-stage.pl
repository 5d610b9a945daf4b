# The confined-service holder's filesystem step, spliced into the sandbox holder (launchers.ts,
# HOLDER) in place of its overlay mount; it runs as root in the holder's private mount namespace and
# uses the holder's variables: %S (syscall numbers), $cg, $none, $ovl, $mnt (the staging folder),
# $lower (the bind list), $huid (the unprivileged host uid) and fail().
#
# First the watchdog (root, already in the cgroups): stdin is a pipe whose write end only the
# platform holds. EOF means the platform process is gone (even by SIGKILL): kill everything in the
# cgroups. So does the end of its parent (the holder, then bwrap): bwrap's own sandbox init arms its
# parent-death signal only once it is set up, so a bwrap killed before that leaves it running.
# Only SIGKILL (the platform emptying the cgroup) ends the watchdog otherwise.
my $wd = fork();
defined($wd) or fail("fork watchdog");
if ($wd == 0) {
  $SIG{$_} = "IGNORE" for qw(TERM INT HUP QUIT PIPE);
  my $holder = getppid();
  open(STDOUT, ">", "/dev/null"); open(STDERR, ">", "/dev/null");
  for my $fd (4, 5, 6, 7) { open(my $x, "<&=", $fd) and close($x); }
  my $rin = ""; vec($rin, 0, 1) = 1;
  while (getppid() == $holder) {
    my $ready = select(my $r = $rin, undef, undef, 0.25);
    if ($ready < 0) { last if $! != 4; next; }
    next unless $ready;
    my $n = sysread(STDIN, my $buf, 64);
    last if defined($n) && $n == 0;
    last if !defined($n) && $! != 4;
  }
  for my $round (1 .. 100) {
    my $left = 0;
    for my $f (grep { length } split /:/, $cg) {
      open(my $h, "<", $f) or next;
      while (my $p = <$h>) { chomp $p; next if $p == $$ || !$p; kill 9, $p; $left++; }
      close($h);
    }
    last unless $left;
    select(undef, undef, undef, 0.02);
  }
  exit 0;
}

# Then every bind source is staged on $mnt/<n> (a tmpfs of this namespace): bubblewrap, which runs
# as the unprivileged uid, binds those, since it could not traverse the platform's private folders
# (0700, root) to the sources themselves. The list holds NUL-separated records of five fields:
#   n, kind, base, rel, name
# The source is base/rel. The base is a folder of the platform's own, opened as it is; rel (empty
# for the base itself) is resolved from it with openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS):
# deployed code writes the trees below some bases, and a link it planted there (`escape -> /`) must
# not make root mount the host's tree. The source is used through its open descriptor, so what was
# checked is what is staged, whatever changes in between.
# How it is staged keeps host paths out of the confinement's /proc/self/mountinfo (a bind mount's
# root field is its source's path in its filesystem: the platform's home, where Wharf is installed):
# kind "r" (read-only): a folder becomes a read-only overlay whose lower layer is named by
#   descriptor (mountinfo shows `lowerdir=/proc/self/fd/N`); a file is bound (the platform rewrites
#   some in place while they are shown: egress files);
# kind "c": a regular file of the runtime's that never changes, copied into the tmpfs (a folder
#   is a read-only view as with "r");
# kind "o": a writable overlay of the source folder (named by descriptor) whose changes go to this
#   tmpfs, thrown away with the namespace;
# kind "b": a writable bind of the source (it shows its path).
# name is where the source appears inside, for messages (never a host path).
my ($tmpfs, $tmode) = ("tmpfs", "mode=0755");
syscall($S{mount}, $none, $mnt, $tmpfs, 2 | 4, $tmode) == 0 or fail("mount staging tmpfs");
my $empty = "$mnt/empty";
mkdir($empty, 0755) or fail("staging empty folder");
open(my $lf, "<", $lower) or fail("bind list");
my @bl = do { local $/; split /\0/, <$lf>, -1 };
close($lf);
# O_PATH | O_CLOEXEC: a handle on the path only (no read, no open of a FIFO), gone at exec.
my $opath = 0x200000 | 0x80000;
sub open_how {
  my ($dirfd, $p, $resolve) = @_;
  my $how = pack("QQQ", $opath, 0, $resolve);
  return syscall($S{openat2}, $dirfd, $p, $how, 24);
}
# Files copied into the staging tmpfs are the runtime's small manifests: anything bigger is refused.
my $copy_cap = 1 << 20;
while (@bl >= 5) {
  my ($bi, $bkind, $bbase, $brel, $bname) = splice(@bl, 0, 5);
  my $bt = "$mnt/$bi";
  $bkind =~ /^[robc]$/ or fail("bind list: unknown kind $bkind");
  my $fd = open_how(-100, $bbase, 0);
  $fd >= 0 or fail("bind source of $bname");
  if (length $brel) {
    my $base = $fd;
    # RESOLVE_BENEATH 0x08 | RESOLVE_NO_SYMLINKS 0x04 | RESOLVE_NO_MAGICLINKS 0x02
    $fd = open_how($base, $brel, 0x08 | 0x04 | 0x02);
    if ($fd < 0) {
      # ELOOP: a link on the way; EXDEV: a way out of the base.
      fail("the source of $bname is or passes through a symbolic link (refused)") if $! == 40 || $! == 18;
      fail("bind source of $bname");
    }
    syscall($S{close}, $base);
  }
  my $src = "/proc/self/fd/$fd";
  if ($bkind eq "o") {
    -d $src or fail("overlay source of $bname is not a folder");
    mkdir($_, 0700) or fail("overlay layers of $bname") for ("$bt-u", "$bt-w");
    chown($huid, $huid, "$bt-u") or fail("overlay layer of $bname");
    mkdir($bt, 0755) or fail("overlay target $bname");
    my $o = "lowerdir=$src,upperdir=$bt-u,workdir=$bt-w";
    syscall($S{mount}, $ovl, $bt, $ovl, 2 | 4, $o) == 0 or fail("overlay for $bname");
  } elsif ($bkind ne "b" && -d $src) {
    mkdir($bt, 0755) or fail("bind target $bname");
    # Without an upper layer overlayfs wants two lower ones: the second is empty.
    my $o = "lowerdir=$src:$empty";
    syscall($S{mount}, $ovl, $bt, $ovl, 1 | 2 | 4, $o) == 0 or fail("read-only view of $bname");
  } elsif ($bkind eq "c") {
    -f $src or fail("source of $bname is neither a folder nor a regular file");
    # O_RDONLY | O_NONBLOCK | O_CLOEXEC through the checked descriptor.
    sysopen(my $in, $src, 0x800 | 0x80000) or fail("source of $bname");
    my $n = sysread($in, my $data, $copy_cap + 1);
    defined($n) && $n <= $copy_cap or fail("source of $bname is over $copy_cap bytes");
    close($in);
    open(my $out, ">", $bt) or fail("copy of $bname");
    print $out $data;
    close($out) or fail("copy of $bname");
    chmod(0644, $bt) or fail("copy of $bname");
  } else {
    if (-d $src) { mkdir($bt, 0755) or fail("bind target $bname"); } else { open(my $bx, ">", $bt) or fail("bind target $bname"); close($bx); }
    syscall($S{mount}, $src, $bt, 0, 4096 | 16384, 0) == 0 or fail("bind $bname");
  }
  # The lowest free descriptors are the holder's: the seccomp program must open as fd 3. An
  # overlay keeps its own references to its layers.
  syscall($S{close}, $fd);
}
