import { fork, type ChildProcess } from "node:child_process";
import os from "node:os";
import type { Logger } from "../log/logger.ts";

/**
 * `wharf up` is a small supervisor: the platform runs in a child process that it starts again when
 * a fault ends it (`fault-policy.ts`), so one crash does not take every tenant down for good. The
 * child's own restart logic does the rest: sandboxes are re-adopted, the deployments' servers
 * (which die with the process that ran them) are served again, interrupted runs resume.
 *
 * The supervisor loads none of the platform. Signals are forwarded to the child (which runs in its
 * own process group, so a terminal's Ctrl-C reaches it once, through here). If the supervisor itself
 * is killed, the child ends at once too (it watches the IPC channel): `kill -9` of `wharf up` still
 * means the platform is gone, as it did before there was a supervisor.
 */

/** Messages from the platform child. */
export type ChildMessage = { type: "ready" };

export type ExitDecision = { action: "exit"; code: number } | { action: "restart"; delayMs: number };

/** `wharf up`'s exit code when the platform could not start: not restarted (a configuration or storage problem). */
export const CANNOT_START_EXIT_CODE = 1;
const BAD_CONFIGURATION_EXIT_CODE = 2;
const WINDOW_MS = 60_000;

/**
 * What to do when the platform child exits. A graceful stop (asked by a signal) or a start-up
 * failure ends `wharf up` with the child's code; anything else (a fault, a signal from elsewhere,
 * the OOM killer) restarts it, after a delay that doubles with each recent restart (0.25 s up to 30 s).
 */
export function onChildExit(e: { code: number | null; signal: string | null; stopping: boolean; wasReady: boolean; recentRestarts: number }): ExitDecision {
  const code = e.code ?? 128 + (e.signal ? (os.constants.signals[e.signal as NodeJS.Signals] ?? 1) : 1);
  if (e.stopping) return { action: "exit", code };
  if (!e.wasReady && (e.code === CANNOT_START_EXIT_CODE || e.code === BAD_CONFIGURATION_EXIT_CODE)) return { action: "exit", code };
  return { action: "restart", delayMs: Math.min(30_000, 250 * 2 ** Math.min(e.recentRestarts, 7)) };
}

/** Restarts within the last minute, oldest dropped. */
export function recentRestarts(times: number[], now: number): number[] {
  return times.filter((t) => now - t < WINDOW_MS);
}

/** Runs the platform in a child (`childArgs` after the CLI's entry point) and keeps it running. Never returns. */
export function supervise(childArgs: string[], log: Logger): void {
  let child: ChildProcess | null = null;
  let stopping = false;
  let restarts: number[] = [];
  let pendingStart: NodeJS.Timeout | null = null;

  const start = () => {
    pendingStart = null;
    let ready = false;
    const c = fork(process.argv[1], childArgs, { stdio: "inherit", detached: true, execArgv: process.execArgv });
    child = c;
    c.on("message", (m: ChildMessage) => {
      if (m?.type === "ready") ready = true;
    });
    c.once("exit", (code, signal) => {
      child = null;
      restarts = recentRestarts(restarts, Date.now());
      const decision = onChildExit({ code, signal, stopping, wasReady: ready, recentRestarts: restarts.length });
      if (decision.action === "exit") process.exit(decision.code);
      restarts.push(Date.now());
      log.error({ code, signal, pid: c.pid, restartInMs: decision.delayMs, restartsInLastMinute: restarts.length }, "the platform process ended unexpectedly; starting it again");
      pendingStart = setTimeout(start, decision.delayMs);
    });
  };

  const forward = (signal: NodeJS.Signals) => {
    stopping = true;
    if (pendingStart) {
      clearTimeout(pendingStart);
      process.exit(0);
    }
    child?.kill(signal);
  };
  process.on("SIGTERM", () => forward("SIGTERM"));
  process.on("SIGINT", () => forward("SIGINT"));
  // A closed terminal: the child is in its own group and would not hear of it.
  process.on("SIGHUP", () => forward("SIGTERM"));
  start();
}

/**
 * In the platform child: tells the supervisor when the platform serves, and ends this process at
 * once if the supervisor goes away (nothing would restart or stop it, and it would hold the port).
 */
export function superviseFromChild(): { ready(): void } {
  process.once("disconnect", () => process.kill(process.pid, "SIGKILL"));
  return { ready: () => process.send?.({ type: "ready" } satisfies ChildMessage) };
}
