import fs from "node:fs";
import { descendantsOf, enterArgs, isAlive, killGroupsAndProcesses } from "../../../confinement/index.ts";
import type { RuntimeRef } from "../driver.ts";
import type { LocalHost } from "./host.ts";
import type { LocalRef } from "./ref.ts";

export function killTree(id: string, holderPid: number, initPid: number): void {
  // SIGKILL to a pid namespace's init kills everything in that namespace (and commands that entered it).
  for (const p of [initPid, holderPid]) {
    if (!p) continue;
    try {
      process.kill(p, "SIGKILL");
    } catch {
      // the process (group) is already gone
    }
  }
  void id;
}

export async function stop(host: LocalHost, id: string, ref: RuntimeRef | null): Promise<void> {
  const r = ref as unknown as LocalRef | null;
  if (r) {
    if (isAlive(r.init)) killTree(id, 0, r.init.pid);
    if (isAlive(r.holder)) killTree(id, r.holder.pid, 0);
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
export function endOrphanedCommands(host: LocalHost, id: string, ref: RuntimeRef): number {
  const r = ref as unknown as LocalRef;
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
