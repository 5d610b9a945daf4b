# The confined-service holder's filesystem step: with this file loaded, holder.pl calls
# stage_binds() in place of its overlay mount. It runs as root in the holder's private mount
# namespace, already in the service's cgroups.
#   stage_binds(\%syscalls, $cg (cgroup.procs files, ":"-separated), $mnt (the staging folder),
#               $lower (the bind list file), $upper (a folder of the platform's for overlay work
#               folders, or "-"), $huid (the unprivileged host uid))
package WharfStage;
use strict;

use constant {
  MS_RDONLY => 1,
  MS_NOSUID => 2,
  MS_NODEV  => 4,
  MS_BIND   => 4096,
  MS_REC    => 16384,
  O_PATH    => 0x200000,
  O_CLOEXEC => 0x80000,
  O_RDONLY_NONBLOCK => 0x800,
  AT_FDCWD  => -100,
  RESOLVE_NO_MAGICLINKS => 0x02,
  RESOLVE_NO_SYMLINKS   => 0x04,
  RESOLVE_BENEATH       => 0x08,
  SIGKILL   => 9,
  EINTR     => 4,
  EXDEV     => 18,
  ELOOP     => 40,
};

sub stage_binds {
  my ($S, $cg, $mnt, $lower, $upper, $huid) = @_;
  # syscall() hands strings over as writable buffers: literals are read-only, so use copies.
  my ($none, $ovl) = ("none", "overlay");
  # First the watchdog (root, already in the cgroups): stdin is a pipe whose write end only the
  # platform holds. EOF means the platform process is gone (even by SIGKILL): kill everything in the
  # cgroups. So does the end of its parent (the holder, then bwrap): bwrap's own sandbox init arms its
  # parent-death signal only once it is set up, so a bwrap killed before that leaves it running.
  # Only SIGKILL (the platform emptying the cgroup) ends the watchdog otherwise.
  my $wd = fork();
  defined($wd) or main::fail("fork watchdog");
  if ($wd == 0) {
    $SIG{$_} = "IGNORE" for qw(TERM INT HUP QUIT PIPE);
    my $holder = getppid();
    open(STDOUT, ">", "/dev/null"); open(STDERR, ">", "/dev/null");
    for my $fd (4, 5, 6, 7) { if (open(my $x, "<&=", $fd)) { close($x); } }
    my $rin = ""; vec($rin, 0, 1) = 1;
    while (getppid() == $holder) {
      my $ready = select(my $r = $rin, undef, undef, 0.25);
      if ($ready < 0) { last if $! != EINTR; next; }
      next unless $ready;
      my $n = sysread(STDIN, my $buf, 64);
      last if defined($n) && $n == 0;
      last if !defined($n) && $! != EINTR;
    }
    for my $round (1 .. 100) {
      my $left = 0;
      for my $f (grep { length } split /:/, $cg) {
        open(my $h, "<", $f) or next;
        while (my $p = <$h>) { chomp $p; next if $p == $$ || !$p; kill SIGKILL, $p; $left++; }
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
  # kind "b": a writable folder: an overlay whose upper layer is the source itself (named by
  #   descriptor, its lower layer empty), so writes land in the source as they would through a bind
  #   and the mount table shows `upperdir=/proc/self/fd/N`; its work folder is made below $upper (a
  #   folder of the platform's on the same filesystem, "-" for none). Where the kernel refuses that
  #   (the source on another filesystem, or on one overlayfs cannot write to) it falls back to a bind,
  #   which shows the source's path; a file is bound;
  # kind "s": a writable bind, always (unix sockets bound through an overlay cannot be reached from
  #   the host's side: the socket folder; its path is not the platform's home).
  # A read-only file below a base (an egress file the platform rewrites in place) is bound from a
  # read-only view of its folder, so the bind's root is that view's, not the host's path.
  # name is where the source appears inside, for messages (never a host path).
  my ($tmpfs, $tmode) = ("tmpfs", "mode=0755");
  syscall($S->{mount}, $none, $mnt, $tmpfs, MS_NOSUID | MS_NODEV, $tmode) == 0 or main::fail("mount staging tmpfs");
  my $empty = "$mnt/empty";
  mkdir($empty, 0755) or main::fail("staging empty folder");
  open(my $lf, "<", $lower) or main::fail("bind list");
  my @bl = do { local $/; split /\0/, <$lf>, -1 };
  close($lf);
  # O_PATH | O_CLOEXEC: a handle on the path only (no read, no open of a FIFO), gone at exec.
  my $opath = O_PATH | O_CLOEXEC;
  my $open_how = sub {
    my ($dirfd, $p, $resolve) = @_;
    my $how = pack("QQQ", $opath, 0, $resolve);
    return syscall($S->{openat2}, $dirfd, $p, $how, length($how));
  };
  # A writable folder as the upper layer of an overlay (see kind "b"): false when the kernel refuses.
  my $upper_overlay = sub {
    my ($src, $bt, $bi) = @_;
    my $wk = "$upper/work-$bi";
    mkdir($wk, 0700) or main::fail("overlay work folder");
    my $wfd = $open_how->(AT_FDCWD, $wk, 0);
    $wfd >= 0 or main::fail("overlay work folder");
    mkdir($bt, 0755) or main::fail("overlay target");
    my $o = "lowerdir=$empty,upperdir=$src,workdir=/proc/self/fd/$wfd";
    my $ok = syscall($S->{mount}, $ovl, $bt, $ovl, MS_NOSUID | MS_NODEV, $o) == 0;
    syscall($S->{close}, $wfd);
    rmdir($bt) unless $ok;
    return $ok;
  };
  # A read-only file below a base, bound from a read-only view of its folder: the folder is opened
  # from the base as the file was (no link followed), the file in it must be a regular file.
  my $file_from_view = sub {
    my ($base, $rel, $bt, $bname) = @_;
    my ($dir, $leaf) = $rel =~ m{^(?:(.*)/)?([^/]+)$} or main::fail("bind source of $bname");
    my $bfd = $open_how->(AT_FDCWD, $base, 0);
    $bfd >= 0 or main::fail("bind source of $bname");
    my $dfd = length($dir // "") ? $open_how->($bfd, $dir, RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS) : $bfd;
    $dfd >= 0 or main::fail("bind source of $bname");
    my $view = "$bt-view";
    mkdir($view, 0755) or main::fail("view of $bname");
    syscall($S->{mount}, $ovl, $view, $ovl, MS_RDONLY | MS_NOSUID | MS_NODEV, "lowerdir=/proc/self/fd/$dfd:$empty") == 0 or main::fail("view of $bname");
    syscall($S->{close}, $dfd);
    syscall($S->{close}, $bfd) if $bfd != $dfd;
    (-f "$view/$leaf" && !-l "$view/$leaf") or main::fail("source of $bname is not a regular file");
    open(my $bx, ">", $bt) or main::fail("bind target $bname");
    close($bx);
    syscall($S->{mount}, "$view/$leaf", $bt, 0, MS_BIND | MS_REC, 0) == 0 or main::fail("bind $bname");
  };
  # Files copied into the staging tmpfs are the runtime's small manifests: anything bigger is refused.
  my $copy_cap = 1 << 20;
  while (@bl >= 5) {
    my ($bi, $bkind, $bbase, $brel, $bname) = splice(@bl, 0, 5);
    my $bt = "$mnt/$bi";
    $bkind =~ /^[robcs]$/ or main::fail("bind list: unknown kind $bkind");
    my $fd = $open_how->(AT_FDCWD, $bbase, 0);
    $fd >= 0 or main::fail("bind source of $bname");
    if (length $brel) {
      my $base = $fd;
      $fd = $open_how->($base, $brel, RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS);
      if ($fd < 0) {
        # ELOOP: a link on the way; EXDEV: a way out of the base.
        main::fail("the source of $bname is or passes through a symbolic link (refused)") if $! == ELOOP || $! == EXDEV;
        main::fail("bind source of $bname");
      }
      syscall($S->{close}, $base);
    }
    my $src = "/proc/self/fd/$fd";
    if ($bkind eq "o") {
      -d $src or main::fail("overlay source of $bname is not a folder");
      mkdir($_, 0700) or main::fail("overlay layers of $bname") for ("$bt-u", "$bt-w");
      chown($huid, $huid, "$bt-u") or main::fail("overlay layer of $bname");
      mkdir($bt, 0755) or main::fail("overlay target $bname");
      my $o = "lowerdir=$src,upperdir=$bt-u,workdir=$bt-w";
      syscall($S->{mount}, $ovl, $bt, $ovl, MS_NOSUID | MS_NODEV, $o) == 0 or main::fail("overlay for $bname");
    } elsif ($bkind !~ /^[bs]$/ && -d $src) {
      mkdir($bt, 0755) or main::fail("bind target $bname");
      # Without an upper layer overlayfs wants two lower ones: the second is empty.
      my $o = "lowerdir=$src:$empty";
      syscall($S->{mount}, $ovl, $bt, $ovl, MS_RDONLY | MS_NOSUID | MS_NODEV, $o) == 0 or main::fail("read-only view of $bname");
    } elsif ($bkind eq "c") {
      -f $src or main::fail("source of $bname is neither a folder nor a regular file");
      # O_RDONLY | O_NONBLOCK | O_CLOEXEC through the checked descriptor.
      sysopen(my $in, $src, O_RDONLY_NONBLOCK | O_CLOEXEC) or main::fail("source of $bname");
      my $n = sysread($in, my $data, $copy_cap + 1);
      defined($n) && $n <= $copy_cap or main::fail("source of $bname is over $copy_cap bytes");
      close($in);
      open(my $out, ">", $bt) or main::fail("copy of $bname");
      print $out $data;
      close($out) or main::fail("copy of $bname");
      chmod(0644, $bt) or main::fail("copy of $bname");
    } elsif ($bkind eq "b" && -d $src && $upper ne "-" && $upper_overlay->($src, $bt, $bi)) {
      # Shown through its overlay.
    } elsif ($bkind eq "r" && length $brel && !-d $src) {
      $file_from_view->($bbase, $brel, $bt, $bname);
    } else {
      if (-d $src) { mkdir($bt, 0755) or main::fail("bind target $bname"); } else { open(my $bx, ">", $bt) or main::fail("bind target $bname"); close($bx); }
      syscall($S->{mount}, $src, $bt, 0, MS_BIND | MS_REC, 0) == 0 or main::fail("bind $bname");
    }
    # The lowest free descriptors are the holder's: the seccomp program must open as fd 3. An
    # overlay keeps its own references to its layers.
    syscall($S->{close}, $fd);
  }
}

package main;
1;
