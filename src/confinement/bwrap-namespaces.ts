/**
 * The namespaces every bubblewrap-confined process gets: its own user (without the right to make
 * more), IPC, PID, UTS and, where the kernel allows, cgroup namespace.
 */
export const BWRAP_NAMESPACES: readonly string[] = [
  "--unshare-user",
  "--unshare-ipc",
  "--unshare-pid",
  "--unshare-uts",
  "--unshare-cgroup-try",
  "--disable-userns",
];
