import fs from "node:fs";
import os from "node:os";
import { newId } from "../../store/ids.ts";

/**
 * Where this process runs: the machine's boot and its PID namespace. Two processes with the same
 * place see each other's PIDs, so a dead one can be told from a live one at once.
 */
function readPlace(): string {
  const read = (p: string) => {
    try {
      return fs.readFileSync(p, "utf8").trim();
    } catch {
      return null; // not Linux (or /proc hidden): fall back to the host name below
    }
  };
  let ns: string | null = null;
  try {
    ns = String(fs.statSync("/proc/self/ns/pid").ino);
  } catch {
    ns = null; // no PID namespace information: the place is the host alone
  }
  return [read("/proc/sys/kernel/random/boot_id") ?? os.hostname(), ns ?? "-"].join("~").replace(/[^A-Za-z0-9~-]/g, "");
}

const PLACE = readPlace();

/** A worker id: `<place>.<pid>.<unique>` (the `worker_id` of the runs this process executes). */
export function newWorkerId(): string {
  return `${PLACE}.${process.pid}.${newId()}`;
}

/**
 * True when the worker is a process of this machine and PID namespace that no longer exists
 * (killed with -9, crashed): its runs can end at once instead of waiting for their lease. Any
 * doubt (another place, a PID in use, a foreign format) answers false and the lease decides.
 */
export function isDeadLocalWorker(workerId: string, ownPid = process.pid, place = PLACE): boolean {
  const parts = workerId.split(".");
  if (parts.length !== 3 || parts[0] !== place) return false;
  const pid = Number(parts[1]);
  if (!Number.isInteger(pid) || pid <= 0 || pid === ownPid) return false;
  try {
    process.kill(pid, 0);
    return false;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "ESRCH";
  }
}
