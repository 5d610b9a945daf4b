import fs from "node:fs";
import { descendantsOf, enterArgs, isAlive, killGroupsAndProcesses } from "../../../confinement/index.ts";
import type { LocalHost } from "./host.ts";
import type { LocalRef } from "./ref.ts";

/** SIGKILL to each pid given (0: none); a pid namespace's init takes everything in it along (commands that entered it too). */
export function sigkill(...pids: number[]): void {
  for (const p of pids) {
    if (!p) continue;
    try {
      process.kill(p, "SIGKILL");
    } catch {
      // the process (group) is already gone
    }
  }
}

export async function stop(host: LocalHost, id: string, r: LocalRef | null): Promise<void> {
  if (r) {
    if (isAlive(r.init)) sigkill(r.init.pid);
    if (isAlive(r.holder)) sigkill(r.holder.pid);
  }
  await host.cg.destroy(id);
  if (r) {
    const deadline = Date.now() + 5000;
    while ((isAlive(r.holder) || isAlive(r.init)) && Date.now() < deadline)
      await new Promise((res) => setTimeout(res, 2));
  }
}

/**
 * After a platform restart: the launchers of commands the previous process started are orphans
 * (nobody reads their output); end those commands. Returns how many were ended.
 */
export function endOrphanedCommands(host: LocalHost, id: string, r: LocalRef): number {
  let ended = 0;
  for (const pid of host.cg.pids(id)) {
    if (pid === r.holder.pid) continue;
    let argv: string[];
    try {
      argv = fs.readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0");
    } catch {
      continue; // exited meanwhile
    }
    if (argv[0] !== "/usr/bin/perl" || !isEnterCommand(argv.slice(1))) continue;
    killGroupsAndProcesses([...descendantsOf(pid), pid]);
    ended++;
  }
  return ended;
}

/** Whether a process's arguments (after perl's path) are the command launcher's (perl/enter.pl). */
function isEnterCommand(args: string[]): boolean {
  const enter = enterArgs();
  return enter.every((a, i) => args[i] === a);
}
