/**
 * A classic-BPF seccomp filter, generated here so no compiler or libseccomp is needed: allow
 * everything except a deny-list of syscalls that widen the kernel's attack surface and that no
 * ordinary workload needs (the list follows Docker's default profile and sandbox-runtime).
 * Denied calls fail with EPERM (ENOSYS for clone3/io_uring so libraries fall back cleanly).
 * Foreign ABIs (x32, i386 on x86_64) are refused outright.
 */
const DENY = [
  "acct",
  "add_key",
  "bpf",
  "delete_module",
  "finit_module",
  "fsconfig",
  "fsmount",
  "fsopen",
  "fspick",
  "init_module",
  "ioperm",
  "iopl",
  "kexec_file_load",
  "kexec_load",
  "keyctl",
  "lookup_dcookie",
  "mount",
  "mount_setattr",
  "move_mount",
  "name_to_handle_at",
  "open_by_handle_at",
  "open_tree",
  "perf_event_open",
  "pivot_root",
  "process_vm_readv",
  "process_vm_writev",
  "ptrace",
  "quotactl",
  "reboot",
  "request_key",
  "setns",
  "swapoff",
  "swapon",
  "syslog",
  "umount2",
  "unshare",
  "userfaultfd",
  "uselib",
  "vhangup",
  "kcmp",
  "fanotify_init",
] as const;
const ENOSYS_LIST = ["io_uring_setup", "io_uring_enter", "io_uring_register"] as const;

type Name = (typeof DENY)[number] | (typeof ENOSYS_LIST)[number];

const X86_64: Partial<Record<Name, number>> = {
  acct: 163,
  add_key: 248,
  bpf: 321,
  delete_module: 176,
  finit_module: 313,
  fsconfig: 431,
  fsmount: 432,
  fsopen: 430,
  fspick: 433,
  init_module: 175,
  ioperm: 173,
  iopl: 172,
  kexec_file_load: 320,
  kexec_load: 246,
  keyctl: 250,
  lookup_dcookie: 212,
  mount: 165,
  mount_setattr: 442,
  move_mount: 429,
  name_to_handle_at: 303,
  open_by_handle_at: 304,
  open_tree: 428,
  perf_event_open: 298,
  pivot_root: 155,
  process_vm_readv: 310,
  process_vm_writev: 311,
  ptrace: 101,
  quotactl: 179,
  reboot: 169,
  request_key: 249,
  setns: 308,
  swapoff: 168,
  swapon: 167,
  syslog: 103,
  umount2: 166,
  unshare: 272,
  userfaultfd: 323,
  uselib: 134,
  vhangup: 153,
  kcmp: 312,
  fanotify_init: 300,
  io_uring_setup: 425,
  io_uring_enter: 426,
  io_uring_register: 427,
};
const AARCH64: Partial<Record<Name, number>> = {
  acct: 89,
  add_key: 217,
  bpf: 280,
  delete_module: 106,
  finit_module: 273,
  fsconfig: 431,
  fsmount: 432,
  fsopen: 430,
  fspick: 433,
  init_module: 105,
  kexec_file_load: 294,
  kexec_load: 104,
  keyctl: 219,
  lookup_dcookie: 18,
  mount: 40,
  mount_setattr: 442,
  move_mount: 429,
  name_to_handle_at: 264,
  open_by_handle_at: 265,
  open_tree: 428,
  perf_event_open: 241,
  pivot_root: 41,
  process_vm_readv: 270,
  process_vm_writev: 271,
  ptrace: 117,
  quotactl: 60,
  reboot: 142,
  request_key: 218,
  setns: 268,
  swapoff: 225,
  swapon: 224,
  syslog: 116,
  umount2: 39,
  unshare: 97,
  userfaultfd: 282,
  vhangup: 58,
  kcmp: 272,
  fanotify_init: 262,
  io_uring_setup: 425,
  io_uring_enter: 426,
  io_uring_register: 427,
};

/** Syscalls the perl launchers call directly (perl-base has no POSIX bindings for them). */
export interface LauncherSyscalls {
  setns: number;
  setgroups: number;
  setresgid: number;
  setresuid: number;
  prctl: number;
  setsid: number;
  setrlimit: number;
  unshare: number;
  mount: number;
  sendmsg: number;
  /** The same number on every architecture (added after the tables were unified). */
  openat2: number;
  close: number;
}

const ARCHES: Record<
  string,
  { audit: number; table: Partial<Record<Name, number>>; x32: boolean; sys: LauncherSyscalls }
> = {
  x64: {
    audit: 0xc000003e,
    table: X86_64,
    x32: true,
    sys: {
      setns: 308,
      setgroups: 116,
      setresgid: 119,
      setresuid: 117,
      prctl: 157,
      setsid: 112,
      setrlimit: 160,
      unshare: 272,
      mount: 165,
      sendmsg: 46,
      openat2: 437,
      close: 3,
    },
  },
  arm64: {
    audit: 0xc00000b7,
    table: AARCH64,
    x32: false,
    sys: {
      setns: 268,
      setgroups: 159,
      setresgid: 149,
      setresuid: 147,
      prctl: 167,
      setsid: 157,
      setrlimit: 164,
      unshare: 97,
      mount: 40,
      sendmsg: 211,
      openat2: 437,
      close: 57,
    },
  },
};

const LD_W_ABS = 0x20,
  JEQ_K = 0x15,
  JGE_K = 0x35,
  RET_K = 0x06;
const RET_ALLOW = 0x7fff0000,
  RET_ERRNO = 0x00050000,
  RET_KILL_PROCESS = 0x80000000;
const EPERM = 1,
  ENOSYS = 38;

interface Insn {
  code: number;
  jt: number;
  jf: number;
  k: number;
}

/** Syscall numbers the launchers need on this machine, or null when the architecture is not supported. */
export function archSyscalls(): LauncherSyscalls | null {
  return ARCHES[process.arch]?.sys ?? null;
}

/** The filter as the kernel's `struct sock_filter[]` bytes, or null on an architecture we have no table for. */
export function buildSeccompFilter(): Buffer | null {
  const arch = ARCHES[process.arch];
  if (!arch) return null;
  const deny = DENY.map((n) => arch.table[n]).filter((n): n is number => n !== undefined);
  const nosys = ENOSYS_LIST.map((n) => arch.table[n]).filter((n): n is number => n !== undefined);
  const prog: Insn[] = [];
  prog.push({ code: LD_W_ABS, jt: 0, jf: 0, k: 4 }); // seccomp_data.arch
  prog.push({ code: JEQ_K, jt: 1, jf: 0, k: arch.audit });
  prog.push({ code: RET_K, jt: 0, jf: 0, k: RET_KILL_PROCESS });
  prog.push({ code: LD_W_ABS, jt: 0, jf: 0, k: 0 }); // seccomp_data.nr
  // Layout after the checks: [ALLOW, ERRNO(EPERM), ERRNO(ENOSYS)]; jumps count from the next instruction.
  const checks = (arch.x32 ? 1 : 0) + deny.length + nosys.length;
  // From check i, a jump of (checks - i) lands on the EPERM return, one more on ENOSYS.
  let i = 0;
  if (arch.x32) {
    prog.push({ code: JGE_K, jt: checks - i, jf: 0, k: 0x40000000 });
    i++;
  }
  for (const nr of deny) {
    prog.push({ code: JEQ_K, jt: checks - i, jf: 0, k: nr });
    i++;
  }
  for (const nr of nosys) {
    prog.push({ code: JEQ_K, jt: checks - i + 1, jf: 0, k: nr });
    i++;
  }
  prog.push({ code: RET_K, jt: 0, jf: 0, k: RET_ALLOW });
  prog.push({ code: RET_K, jt: 0, jf: 0, k: RET_ERRNO | EPERM });
  prog.push({ code: RET_K, jt: 0, jf: 0, k: RET_ERRNO | ENOSYS });
  const buf = Buffer.alloc(prog.length * 8);
  prog.forEach((p, n) => {
    buf.writeUInt16LE(p.code, n * 8);
    buf.writeUInt8(p.jt, n * 8 + 2);
    buf.writeUInt8(p.jf, n * 8 + 3);
    buf.writeUInt32LE(p.k >>> 0, n * 8 + 4);
  });
  return buf;
}
