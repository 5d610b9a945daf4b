import fs from "node:fs";
import { isOutOfDescriptors } from "./descriptors.ts";

/** Small /proc readers for supervising processes we did not necessarily spawn (after a restart). */

/** Start time of a process in clock ticks since boot (field 22 of /proc/PID/stat), or null if gone; throws when out of descriptors. */
export function startTime(pid: number): number | null {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8");
    // The command name may contain spaces and parentheses: fields start after the last ')'.
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    if (fields[0] === "Z" || fields[0] === "X") return null;
    return Number(fields[19]);
  } catch (err) {
    // Out of descriptors says nothing about the process: taking it for gone made a teardown skip
    // killing it (callers retry, `retryOutOfDescriptors`).
    if (isOutOfDescriptors(err)) throw err;
    return null;
  }
}

/** A process identity that survives pid reuse: alive only if the start time still matches. */
export interface ProcRef {
  pid: number;
  start: number;
}

export function procRef(pid: number): ProcRef | null {
  const start = startTime(pid);
  return start === null ? null : { pid, start };
}

export function isAlive(ref: ProcRef | null | undefined): boolean {
  return !!ref && startTime(ref.pid) === ref.start;
}

export function childrenOf(pid: number): number[] {
  try {
    return fs.readFileSync(`/proc/${pid}/task/${pid}/children`, "utf8").trim().split(/\s+/).filter(Boolean).map(Number);
  } catch {
    return [];
  }
}

/** Every descendant of `pid` (with a terminal, a command is the launcher's grandchild). */
export function descendantsOf(pid: number): number[] {
  const all = childrenOf(pid);
  // The array grows while it is walked: each generation's children are reached in turn.
  for (const k of all) for (const g of childrenOf(k)) all.push(g);
  return all;
}

/** SIGKILL to each process's group (a command starts its own session) and to the process itself. */
export function killGroupsAndProcesses(pids: readonly number[]): void {
  for (const p of pids) {
    try {
      process.kill(-p, "SIGKILL");
    } catch {
      // not a group leader, or the group is already gone: the process itself below
    }
    try {
      process.kill(p, "SIGKILL");
    } catch {
      // the process is already gone
    }
  }
}

/** The pid a process has inside its innermost pid namespace (last NSpid entry). */
export function namespacePid(pid: number): number | null {
  try {
    const m = /^NSpid:\s+(.*)$/m.exec(fs.readFileSync(`/proc/${pid}/status`, "utf8"));
    if (!m) return null;
    const all = m[1].trim().split(/\s+/).map(Number);
    return all[all.length - 1];
  } catch {
    return null;
  }
}

/** Resident memory (VmRSS, bytes) of a process, 0 when gone. */
export function rssBytes(pid: number): number {
  try {
    const m = /^VmRSS:\s+(\d+) kB$/m.exec(fs.readFileSync(`/proc/${pid}/status`, "utf8"));
    return m ? Number(m[1]) * 1024 : 0;
  } catch {
    return 0;
  }
}
